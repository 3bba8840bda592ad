#!/usr/bin/env bash
# Round 5: persistent sm90 forward + decode family (default on) quick checks, short bench.
. "$(dirname "$0")/lib.sh"
L=$OUT/logs; mkdir -p $L
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=OFF > $L/configure.log 2>&1
cmake --build build-gpu -j16 --target flexattn gpu_attention_check gpu_decode_check > $L/build.log 2>&1 || { stamp build-failed; grep -m20 error $L/build.log; }
stamp built
timeout 100 $CHECK --quick > $L/quick.log 2>&1; stamp "quick (sm90 persistent + decode) rc=$?"
timeout 40 $F bench --suite short --backend cuda > $L/bench_short.log 2>&1; stamp "bench short rc=$?"
D=$(ls build-gpu/tests/gpu/decode/gpu_decode_check 2>/dev/null)
[ -n "$D" ] && { timeout 90 $D > $L/decode.log 2>&1; stamp "decode check rc=$?"; }
tar czf $OUT/logs.tgz -C $OUT logs
echo ==== quick; grep "^FAIL" $L/quick.log | head -12; tail -3 $L/quick.log
echo ==== decode; grep "^FAIL" $L/decode.log | head -8; tail -6 $L/decode.log
echo ==== bench; tail -10 $L/bench_short.log
cat $L/steps.log
