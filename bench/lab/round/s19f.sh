#!/usr/bin/env bash
# Session 19 round 6 (issue 6): the early turn poll compiled into the first kernel (D = 64, two dQ buffers) by default,
# the launch order and the relaxed polls reverted. Landing checks: the whole --deterministic set (bitwise repeats
# inside), --quick, the Python GPU suite's backward / deterministic / grad tests, memcheck on a deterministic D = 64
# document call; then det18.py at D = 64 and 128.
. "$(dirname "$0")/lib.sh"
out_dir s19f; L=$O
deadline 420
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
det_checks all
quick_check 100
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
timeout $(cap 100 20) python3 -m pytest -q -p no:cacheprovider tests/python/gpu/test_gpu_vs_torch.py \
  -k "backward or deterministic or grad" > $O/pytest.log 2>&1; echo "pytest rc=$? ($(el) s)"; tail -2 $O/pytest.log
timeout $(cap 60 5) compute-sanitizer --tool memcheck $F run --backend cuda --dtype bf16 -B 2 -H 4 -Q 300 -D 64 \
  --mask document:3 --backward --deterministic > $O/memcheck.log 2>&1
echo "memcheck document D=64 det rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' $O/memcheck.log)"
det_timing det 100 DET8_DIMS="64 128"
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
