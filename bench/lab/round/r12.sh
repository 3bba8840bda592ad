#!/usr/bin/env bash
# Session 3 round 5: paged decode with a page shift instead of a runtime division: gpu_decode_check + the
# CLI decode suite.
. "$(dirname "$0")/lib.sh"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=OFF -DFLEXATTN_BUILD_TESTS=ON > $OUT/configure.log 2>&1
cmake --build build-gpu -j16 --target flexattn gpu_decode_check > $OUT/build.log 2>&1 || { grep -m20 error $OUT/build.log; exit 1; }
timeout 60 $F bench --suite decode --backend cuda > $OUT/bench_decode.log 2>&1; echo "decode bench rc=$?"
timeout 120 $DCHECK > $OUT/gpu_decode.log 2>&1; echo "gpu_decode rc=$?"
grep -v "^{" $OUT/bench_decode.log | tail -12; grep "^FAIL" $OUT/gpu_decode.log | head; tail -2 $OUT/gpu_decode.log
