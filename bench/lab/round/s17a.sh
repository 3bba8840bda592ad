#!/usr/bin/env bash
# Session 17 round 1: chained work tiles in the persistent sm90 forward (FLEXATTN_SM90_CHAIN=1: a tile's first
# Q K^T issued with the previous tile's last P V; fwd_consumer_sm90.cuh). Correctness with it on (--quick, and with
# the grid capped at 3 CTAs so every CTA chains many tiles; run --check at odd lengths), then B=2 H=16 S=8192
# forward ms, chain 0 / 1 alternating, three repeats. Predicted: sliding / document +3-6 %, causal +1-2 %, full flat.
. "$(dirname "$0")/lib.sh"
out_dir s17a; L=$O
deadline 560
build_gpu $O flexattn gpu_attention_check
CASES="full causal sliding document prefixlm alibi softcap relbias"
flags() { case $1 in full) ;; causal) echo --mask causal ;; sliding) echo --mask sliding_window:1023 ;;
  prefixlm) echo --mask prefix_lm:2048 ;; alibi) echo --mask causal --score alibi ;; document) echo --mask document:8 ;;
  softcap) echo --mask causal --score softcap:30 ;; relbias) echo --score relbias:const ;; esac; }
runit() {  # k D case B H S log
  local k=$1 d=$2 m=$3; shift 3
  env FLEXATTN_SM90_CHAIN=$k timeout 40 $F run -B $1 -H $2 -Q $3 -D $d --dtype bf16 --backend cuda $(flags $m) > $4 2>&1
}
for m in $CASES; do for k in 0 1; do runit $k 128 $m 1 2 1024 $O/warm_${m}_$k.log & done; done
for m in full sliding document; do for k in 0 1; do runit $k 64 $m 1 2 1024 $O/warm64_${m}_$k.log & done; done
FLEXATTN_SM90_CHAIN=1 timeout $(cap 200 5) $CHECK --quick > $O/check.log 2>&1
echo "check --quick chain rc=$? $(pass_fail $O/check.log) ($(el) s)"; grep ^FAIL $O/check.log | head -3
wait
FLEXATTN_SM90_CHAIN=1 FLEXATTN_SM90_PERSISTENT_CTAS=3 timeout $(cap 120 5) $CHECK --quick --only document --only sliding --only causal --only softcap > $O/check3.log 2>&1
echo "check --quick chain 3 CTAs rc=$? $(pass_fail $O/check3.log) ($(el) s)"; grep ^FAIL $O/check3.log | head -3
export FLEXATTN_SM90_CHAIN=1
for q in 17 1000 4097; do
  FLEXATTN_SM90_PERSISTENT_CTAS=5 run_check --dtype bf16 -Q $q -D 128 --mask sliding_window:300
  FLEXATTN_SM90_PERSISTENT_CTAS=5 run_check --dtype bf16 -Q $q -D 64 --mask document:5
done
FLEXATTN_SM90_PERSISTENT_CTAS=2 run_check --dtype f16 -Q 1000 -D 128 --mask causal --score softcap:30
FLEXATTN_SM90_PERSISTENT_CTAS=2 run_check --dtype bf16 -Q 777 -D 128 --hkv 2 --mask causal --score alibi
unset FLEXATTN_SM90_CHAIN
run_check_summary
for rep in 1 2 3; do
  for m in $CASES; do for k in 0 1; do [ $(left) -gt 40 ] && runit $k 128 $m 2 16 8192 $O/big_${m}_${k}_$rep.log; done; done
  for m in full sliding document; do for k in 0 1; do [ $(left) -gt 40 ] && runit $k 64 $m 2 16 8192 $O/b64_${m}_${k}_$rep.log; done; done
done
echo "runs $(el) s"
echo "| case | D | chain 0 ms | chain 1 ms |"
for m in $CASES; do
  a=""; b=""
  for rep in 1 2 3; do a="$a $(ms_of $O/big_${m}_0_$rep.log forward)"; b="$b $(ms_of $O/big_${m}_1_$rep.log forward)"; done
  echo "| $m | 128 |$a |$b |"
done
for m in full sliding document; do
  a=""; b=""
  for rep in 1 2 3; do a="$a $(ms_of $O/b64_${m}_0_$rep.log forward)"; b="$b $(ms_of $O/b64_${m}_1_$rep.log forward)"; done
  echo "| $m | 64 |$a |$b |"
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
