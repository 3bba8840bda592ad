#!/usr/bin/env bash
# Session 41: python_gpu had 2 failures on torch 2.11 in session 41's first call (its log did not come back): the
# Python files new or changed since the last passing run, with every failure's short traceback.
. "$(dirname "$0")/lib.sh"
out_dir s41p; L=$O
python3 -c "import torch; print('torch', torch.__version__)"
BUILD_PY=ON build_gpu $O flexattn _C
export PYTHONPATH=$PWD/python FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1
timeout ${S41P_CAP:-400} python3 -m pytest -q -p no:cacheprovider -rfE --tb=short ${S41P_FILES:-tests/python/test_export.py \
  tests/python/test_native_torch.py tests/python/test_native_torch_compile.py} > $O/pytest.log 2>&1
echo "pytest rc=$? ($(el) s)"
grep -nE "^(FAILED|ERROR)|Error|error:" $O/pytest.log | head -30
tail -3 $O/pytest.log
