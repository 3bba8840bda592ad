#!/usr/bin/env bash
# Session 3 round 3: the side-by-side Python benches (flexattn vs torch flex vs SDPA): decode suite, then
# the quick suite with --backward (sm90 backward on when FLEXATTN_SM90_BWD=1 is passed in).
. "$(dirname "$0")/lib.sh"
export BENCH_BUILD=build-gpu
mkdir -p $OUT/dec $OUT/quick
timeout ${DEC_S:-200} bash scripts/bench_gpu.sh --suite decode --out $OUT/dec > $OUT/dec.log 2>&1; echo "decode rc=$?"
timeout ${QUICK_S:-330} bash scripts/bench_gpu.sh --backward --out $OUT/quick > $OUT/quick.log 2>&1; echo "quick rc=$?"
tail -25 $OUT/dec.log; tail -16 $OUT/quick.log
tar czf $OUT/bench.tgz -C $OUT dec quick dec.log quick.log && rm -rf $OUT/dec $OUT/quick $OUT/dec.log $OUT/quick.log
