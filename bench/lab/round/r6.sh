#!/usr/bin/env bash
# Round 6 (last, ~140 s): sm90 backward (opt-in) checked + timed; decode + sm90 forward via the quick check.
set -u
cd "$(dirname "$0")/../../.."
L=$OUT/logs; mkdir -p $L
T0=$(date +%s)
left(){ echo $(( ${1} - ($(date +%s) - T0) )); }
stamp(){ echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $L/steps.log; }
export FLEXATTN_CACHE_DIR=$PWD/build-gpu/kernel-cache
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=OFF > $L/configure.log 2>&1
cmake --build build-gpu -j16 --target flexattn gpu_attention_check > $L/build.log 2>&1 || { stamp build-failed; grep -m20 error $L/build.log; }
stamp built
FLEXATTN_SM90_BWD=1 timeout 30 build-gpu/tools/flexattn bench --suite quick --backend cuda > $L/bwd_quick.log 2>&1; stamp "sm90 bwd bench quick rc=$?"
FLEXATTN_SM90_BWD=1 timeout 30 build-gpu/tools/flexattn bench --suite short --backend cuda > $L/bwd_short.log 2>&1; stamp "sm90 bwd bench short rc=$?"
FLEXATTN_SM90_BWD=1 timeout $(left 135) build-gpu/tests/gpu/attention/gpu_attention_check --quick > $L/check.log 2>&1; stamp "check rc=$?"
tar czf $OUT/logs.tgz -C $OUT logs
echo ==== quick; tail -14 $L/bwd_quick.log
echo ==== short; tail -10 $L/bwd_short.log
echo ==== check; grep -c "^PASS" $L/check.log; grep "^FAIL" $L/check.log | head -8
cat $L/steps.log
