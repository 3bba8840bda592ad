#!/usr/bin/env bash
# Session 16 record run (the block-mask builder: compact kernel alone, 2 kv columns per step): bench/run.py --suite long
# --backward and --suite decode from an empty kernel cache; then the Python GPU tests (create_block_mask on the GPU
# against torch flex), the make gpu-test step python_gpu.
. "$(dirname "$0")/lib.sh"
out_dir s16c; L=$O
deadline 560
BUILD_PY=ON build_gpu $O flexattn _C
rm -rf $FLEXATTN_CACHE_DIR
record_suites
FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONUNBUFFERED=1 timeout $(cap 150 10) \
  python3 -m pytest -q -p no:cacheprovider tests/python/gpu tests/python/test_native_torch.py > $O/python_gpu.log 2>&1
echo "python_gpu rc=$? $(tail -1 $O/python_gpu.log) ($(el) s)"
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
