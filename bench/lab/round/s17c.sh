#!/usr/bin/env bash
# Session 17 round 3: kv-range masks (codegen's kKvRange: a partial tile tests each entry's column against the row's
# kv bounds, 2 ISETP + FSEL, instead of mask_mod: sliding window 4.5 -> 3 instructions per entry). Correctness with
# it on (the default): gpu_attention_check --quick, run --check at odd lengths and unequal q / kv lengths; then
# FLEXATTN_SM90_KV_RANGE=0 / 1 at B=2 H=16 S=8192, two repeats. Predicted: sliding +2-4 %, prefix-LM / causal +0-1 %.
. "$(dirname "$0")/lib.sh"
out_dir s17c; L=$O
deadline 300
build_gpu $O flexattn gpu_attention_check
CASES="sliding prefixlm causal softcap"
flags() { case $1 in causal) echo --mask causal ;; sliding) echo --mask sliding_window:1023 ;;
  prefixlm) echo --mask prefix_lm:2048 ;; softcap) echo --mask causal --score softcap:30 ;; esac; }
runit() {  # k D case B H S log
  local k=$1 d=$2 m=$3; shift 3
  env FLEXATTN_SM90_KV_RANGE=$k timeout 20 $F run -B $1 -H $2 -Q $3 -D $d --dtype bf16 --backend cuda $(flags $m) > $4 2>&1
}
for m in $CASES; do for k in 0 1; do runit $k 128 $m 1 2 1024 $O/warm_${m}_$k.log & done; done
for k in 0 1; do runit $k 64 sliding 1 2 1024 $O/warm64_$k.log & done
timeout $(cap 110 5) $CHECK --quick > $O/check.log 2>&1
echo "check --quick rc=$? $(pass_fail $O/check.log) ($(el) s)"; grep ^FAIL $O/check.log | head -3
wait
rc() { if timeout 20 $F run --backend cuda --check -B 1 -H 4 "$@" > $O/run.log 2>&1; then RUN_OK=$((RUN_OK + 1))
  else RUN_BAD=$((RUN_BAD + 1)); echo "FAIL run $* rc=$?"; tail -2 $O/run.log; fi; }
for q in 17 1000; do rc --dtype bf16 -Q $q -D 128 --mask sliding_window:300; done
rc --dtype bf16 -Q 300 --kv 700 -D 128 --mask causal
rc --dtype f16 -Q 700 --kv 300 -D 64 --mask prefix_lm:70
rc --dtype bf16 -Q 1000 -D 128 --mask causal --score softcap:30
rc --dtype bf16 -Q 777 -D 128 --hkv 2 --mask causal --score alibi
rc --dtype bf16 -Q 1000 -D 64 --mask-expr "kv_idx - q_idx <= 5 && q_idx - kv_idx <= 40"
run_check_summary
for rep in 1 2; do
  for m in $CASES; do for k in 0 1; do [ $(left) -gt 15 ] && runit $k 128 $m 2 16 8192 $O/big_${m}_${k}_$rep.log; done; done
  for k in 0 1; do [ $(left) -gt 15 ] && runit $k 64 sliding 2 16 8192 $O/b64_${k}_$rep.log; done
done
echo "runs $(el) s"
echo "| case | D | kv range 0 ms | kv range 1 ms |"
for m in $CASES; do
  a=""; b=""
  for rep in 1 2; do a="$a $(ms_of $O/big_${m}_0_$rep.log forward)"; b="$b $(ms_of $O/big_${m}_1_$rep.log forward)"; done
  echo "| $m | 128 |$a |$b |"
done
a=""; b=""
for rep in 1 2; do a="$a $(ms_of $O/b64_0_$rep.log forward)"; b="$b $(ms_of $O/b64_1_$rep.log forward)"; done
echo "| sliding | 64 |$a |$b |"
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
