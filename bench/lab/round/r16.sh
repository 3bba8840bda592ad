#!/usr/bin/env bash
# Session 4, final round. PART=a: CLI suite full (S=8192 and 2048, D=128 and 64) + every library mod through
# `flexattn run --check --backward`. PART=b: the Python side-by-side (quick + backward, then decode) for
# bench/results/h200-latest.json.
. "$(dirname "$0")/lib.sh"
if [ "${PART:-a}" = a ]; then
  mkdir -p $OUT/final
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=OFF -DFLEXATTN_BUILD_TESTS=ON > $OUT/final/configure.log 2>&1
  cmake --build build-gpu -j16 --target flexattn > $OUT/final/build.log 2>&1 || { grep error $OUT/final/build.log | head; exit 1; }
  timeout 330 $F bench --suite full --backend cuda > $OUT/final/full.log 2>&1; echo "full rc=$?"
  timeout 150 bash scripts/gpu_library_check.sh $OUT/final 2>&1 | tail -8
  grep -v "^{" $OUT/final/full.log | tail -33
else
  OUT=$OUT/py timeout 400 bash scripts/bench_gpu.sh --backward > $OUT/py_quick.log 2>&1; echo "quick rc=$?"
  mkdir -p $OUT/pyd; FLEXATTN_NATIVE_DIR=$PWD/build-bench/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python \
    timeout 150 python3 bench/run.py --suite decode --out $OUT/pyd > $OUT/py_decode.log 2>&1; echo "decode rc=$?"
  tail -14 $OUT/py_quick.log; tail -12 $OUT/py_decode.log
fi
