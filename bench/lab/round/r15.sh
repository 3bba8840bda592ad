#!/usr/bin/env bash
# Session 4, round 2: one tree = main + the helpers' branches (bwd, mods, decode, sched). Build once, then each
# helper's check script under its own time budget, then the short table of each.
. "$(dirname "$0")/lib.sh"
mkdir -p $OUT/logs
build_gpu $OUT/logs flexattn gpu_attention_check gpu_decode_check
for s in ${SCRIPTS:-mods bwd decode sched}; do
  [ -f bench/lab/round/$s.sh ] || { echo "== $s: no script"; continue; }
  b=$(( ${BUDGET_EACH:-110} ))
  t1=$(date +%s)
  timeout $b bash bench/lab/round/$s.sh > $OUT/logs/$s.out 2>&1; rc=$?
  echo "== $s rc=$rc $(( $(date +%s) - t1 )) s"; tail -22 $OUT/logs/$s.out
done
tar czf $OUT/round2.tgz -C $OUT logs $(cd $OUT && ls -d mods bwd decode sched 2>/dev/null) 2>/dev/null
