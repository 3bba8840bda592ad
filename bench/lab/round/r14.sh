#!/usr/bin/env bash
# Session 3, last seconds of device time: the defaults' quick check (branch-free // and %), then the
# opt-in bulk dQ backward quick check, each cut off by its own timeout.
set -u
cd "$(dirname "$0")/../../.."
export FLEXATTN_CACHE_DIR=$PWD/build-gpu/kernel-cache
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=OFF > $OUT/configure.log 2>&1
cmake --build build-gpu -j16 --target gpu_attention_check > $OUT/build.log 2>&1 || { grep -m10 error $OUT/build.log; exit 1; }
echo "built at $SECONDS s"
CHECK=build-gpu/tests/gpu/attention/gpu_attention_check
timeout ${T1:-40} $CHECK --quick > $OUT/default.log 2>&1; echo "default rc=$? at $SECONDS s: $(grep -c '^PASS' $OUT/default.log) passed, $(grep -c '^FAIL' $OUT/default.log) failed"
FLEXATTN_SM90_BWD_DQ_BULK=1 timeout ${T2:-40} $CHECK --quick > $OUT/bulk.log 2>&1; echo "bulk rc=$? at $SECONDS s: $(grep -c '^PASS' $OUT/bulk.log) passed, $(grep -c '^FAIL' $OUT/bulk.log) failed"
grep -h "^FAIL" $OUT/default.log $OUT/bulk.log | head -6; tail -2 $OUT/bulk.log
