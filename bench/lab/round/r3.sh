#!/usr/bin/env bash
# Round 3: make gpu-test (sm90 default + sm80, memcheck both, python GPU suite) then the side-by-side bench.
. "$(dirname "$0")/lib.sh"
L=$OUT/logs; mkdir -p $L
OUT=$L GPU_TEST_PYTHON=1 timeout 330 scripts/gpu_test.sh > $L/gpu_test_summary.log 2>&1
stamp "gpu_test rc=$?"
left=$(( 575 - $(el) ))
FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python FLEXATTN_CACHE_DIR=$PWD/build-gpu/kernel-cache \
  timeout $left python3 bench/run.py --suite quick --backward --out $OUT/bench > $L/bench.log 2>&1
stamp "bench rc=$?"
tar czf $OUT/logs.tgz -C $OUT logs bench 2>/dev/null
echo ==== python; tail -25 $L/python_gpu.log
echo ==== gpu_test; tail -14 $L/gpu_test_summary.log
echo ==== bench; tail -25 $L/bench.log
cat $L/steps.log
