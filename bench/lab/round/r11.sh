#!/usr/bin/env bash
# Session 3 round 4: defaults flipped (sm90 backward, decode hook) and integer divisors compiled in. Build
# everything (incl. _C for the next round), the full attention check with the defaults, the persistent
# forward (helper's Q double-buffer rewrite) quick, then the CLI benches default vs persistent.
. "$(dirname "$0")/lib.sh"
ONLY="${ONLY:-gpu_attention gpu_attention_persistent}" BUDGET=${BUDGET:-300} bash bench/lab/round/r7.sh
timeout 80 $F bench --suite short --backend cuda > $OUT/bench_default.log 2>&1; echo "default rc=$?"
FLEXATTN_SM90_PERSISTENT=1 timeout 60 $F bench --suite short --backend cuda > $OUT/bench_persistent.log 2>&1; echo "persistent rc=$?"
echo "==== default"; grep -v "^{" $OUT/bench_default.log | tail -9
echo "==== persistent"; grep -v "^{" $OUT/bench_persistent.log | tail -9
