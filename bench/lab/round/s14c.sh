#!/usr/bin/env bash
# Session 14 round 3: FLEXATTN_SM90_POLY_EXP2=1 (an eighth of the row exp2s on the FMA pipe) at D=64 on the tree
# without the tail branch. Session 7 measured dense D=64 +4.5 % twice (418 -> 437, 407 -> 424-432), issue 5 wants
# 450 there (record 426-430). B=2 H=16 S=8192 forward, `flexattn run` (median of its timed calls), k = 0 / 1
# alternating, three repeats; then `run --check` with k=1 on two cases. ~4 min.
. "$(dirname "$0")/lib.sh"
out_dir s14c; L=$O
deadline 330
build_gpu $O flexattn
CASES="full causal sliding prefixlm alibi document"
flags() { case $1 in full) ;; causal) echo --mask causal ;; sliding) echo --mask sliding_window:1023 ;;
  prefixlm) echo --mask prefix_lm:2048 ;; alibi) echo --mask causal --score alibi ;; document) echo --mask document:8 ;; esac; }
runit() {  # k case B H S log
  local k=$1 m=$2; shift 2
  env FLEXATTN_SM90_POLY_EXP2=$k timeout 40 $F run -B $1 -H $2 -Q $3 -D 64 --dtype bf16 --backend cuda $(flags $m) > $4 2>&1
}
for m in $CASES; do for k in 0 1; do runit $k $m 1 2 1024 $O/warm_${m}_$k.log & done; done
wait; echo "prewarm $(el) s"
for rep in 1 2 3; do
  for m in $CASES; do for k in 0 1; do [ $(left) -gt 60 ] && runit $k $m 2 16 8192 $O/big_${m}_${k}_$rep.log; done; done
done
echo "runs $(el) s"
for q in 129 1000; do FLEXATTN_SM90_POLY_EXP2=1 run_check --dtype bf16 -Q $q -D 64 --mask causal; done
FLEXATTN_SM90_POLY_EXP2=1 run_check --dtype bf16 -Q 1000 -D 64 --score alibi
run_check_summary
echo "| case | k=0 ms | k=1 ms |"
for m in $CASES; do
  a=""; b=""
  for rep in 1 2 3; do a="$a $(ms_of $O/big_${m}_0_$rep.log forward)"; b="$b $(ms_of $O/big_${m}_1_$rep.log forward)"; done
  echo "| $m |$a |$b |"
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
