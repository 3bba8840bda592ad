#!/usr/bin/env bash
# Session 41: python_gpu had 2 failures on torch 2.11 in session 41's first call (its log did not come back): the
# Python GPU tests (S41P_FILES, default gpu-test's python_gpu set) with every failure's short traceback, the test ids
# dealt round-robin to S41P_PARALLEL pytest processes (default 6: most of the time is NVRTC compiles on the host's
# cores; the kernel cache's entries are written by rename, so the processes share it safely).
. "$(dirname "$0")/lib.sh"
out_dir s41p; L=$O
python3 -c "import torch; print('torch', torch.__version__)"
BUILD_PY=ON build_gpu $O flexattn _C
export PYTHONPATH=$PWD/python FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONUNBUFFERED=1
files=${S41P_FILES:-tests/python/gpu tests/python/test_native_torch.py tests/python/test_native_torch_compile.py tests/python/test_export.py}
n=${S41P_PARALLEL:-6}
python3 -m pytest -q -p no:cacheprovider --co $files 2>/dev/null | grep "::" > $O/ids.txt
echo "$(wc -l < $O/ids.txt) tests, $n processes"
for i in $(seq 0 $((n - 1))); do
  awk -v n=$n -v i=$i 'NR % n == i' $O/ids.txt > $O/ids_$i.txt
  mapfile -t ids < $O/ids_$i.txt  # one id per line: parametrized ids may hold spaces
  timeout ${S41P_CAP:-400} python3 -m pytest -q -p no:cacheprovider -rfE --tb=short "${ids[@]}" > $O/pytest_$i.log 2>&1 &
done
wait
echo "pytest done ($(el) s)"
for i in $(seq 0 $((n - 1))); do echo "part $i: $(tail -1 $O/pytest_$i.log)"; done
grep -hE "^(FAILED|ERROR) " $O/pytest_*.log | head -30
grep -hE "^E  " $O/pytest_*.log | head -30
(cd $O && tar czf ../s41p_logs.tgz . && rm -rf $O)  # few files come back from the device: one archive
