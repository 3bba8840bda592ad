#!/usr/bin/env bash
# Round 6 (last, ~140 s): sm90 backward (opt-in) checked + timed; decode + sm90 forward via the quick check.
. "$(dirname "$0")/lib.sh"
L=$OUT/logs; mkdir -p $L
deadline 135
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=OFF > $L/configure.log 2>&1
cmake --build build-gpu -j16 --target flexattn gpu_attention_check > $L/build.log 2>&1 || { stamp build-failed; grep -m20 error $L/build.log; }
stamp built
FLEXATTN_SM90_BWD=1 timeout 30 $F bench --suite quick --backend cuda > $L/bwd_quick.log 2>&1; stamp "sm90 bwd bench quick rc=$?"
FLEXATTN_SM90_BWD=1 timeout 30 $F bench --suite short --backend cuda > $L/bwd_short.log 2>&1; stamp "sm90 bwd bench short rc=$?"
FLEXATTN_SM90_BWD=1 timeout $(left) $CHECK --quick > $L/check.log 2>&1; stamp "check rc=$?"
tar czf $OUT/logs.tgz -C $OUT logs
echo ==== quick; tail -14 $L/bwd_quick.log
echo ==== short; tail -10 $L/bwd_short.log
echo ==== check; grep -c "^PASS" $L/check.log; grep "^FAIL" $L/check.log | head -8
cat $L/steps.log
