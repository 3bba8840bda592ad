#!/usr/bin/env bash
# Session 7, round 1: FLEXATTN_SM90_POLY_EXP2=k (k eighths of the forward softmax's exp2s on the FMA pipe,
# kernels/common/numeric.cuh poly_exp2) — correctness (--quick with k=4, ALiBi / softcap --check) and S=8192 forward
# TFLOP/s by k for D=64 (MUFU-bound in the model: one exp2 per 256 tensor flops) and D=128 (softcap: 3 MUFU ops per
# entry); then `make gpu-test` part 2 in the time left.
. "$(dirname "$0")/lib.sh"
out_dir r21; L=$O
build_gpu $O gpu_attention_check flexattn
CFGS="64:full:0 64:full:1 64:full:2 64:full:3 64:causal:0 64:causal:2 128:full:0 128:full:1 128:full:2
128:causal:0 128:causal:2 128:softcap:0 128:softcap:2 128:softcap:4 128:alibi:0 128:alibi:1 128:alibi:2"
flags() { case $1 in full) ;; causal) echo --mask causal ;; softcap) echo --mask causal --score softcap:30 ;;
  alibi) echo --mask causal --score alibi ;; esac; }
for c in $CFGS; do IFS=: read d m k <<< "$c"
  FLEXATTN_SM90_POLY_EXP2=$k timeout 60 $F run -B 1 -H 2 -Q 256 -D $d --dtype bf16 --backend cuda $(flags $m) > $O/warm_${d}_${m}_${k}.log 2>&1 &
done
FLEXATTN_SM90_POLY_EXP2=4 timeout 60 $F run -B 1 -H 2 -Q 256 -D 64 --dtype bf16 --backend cuda --mask causal --score softcap:30 > /dev/null 2>&1 &
wait; echo "prewarm $(el) s"
FLEXATTN_SM90_POLY_EXP2=4 timeout 90 $CHECK --quick > $O/check_poly4.log 2>&1; echo "check --quick poly4 rc=$? $(pass_fail $O/check_poly4.log) ($(el) s)"
grep ^FAIL $O/check_poly4.log | head -3
for s in "--mask causal --score softcap:30" "--mask causal --score alibi" "--mask sliding_window:100"; do for d in 64 128; do
  FLEXATTN_SM90_POLY_EXP2=4 timeout 30 $F run -B 1 -H 2 -Q 1000 -D $d --dtype bf16 --backend cuda $s --check > $O/chk.log 2>&1
  echo "run --check poly4 D=$d $s rc=$? $(grep -o 'check: .*' $O/chk.log | head -1)"; done; done
echo "$(el) s"
for c in $CFGS; do IFS=: read d m k <<< "$c"
  FLEXATTN_SM90_POLY_EXP2=$k timeout 20 $F run -B 2 -H 16 -Q 8192 -D $d --dtype bf16 --backend cuda $(flags $m) > $O/big_${d}_${m}_$k.log 2>&1
done
echo "runs $(el) s"
printf "%-10s %4s %6s %8s\n" case D poly TFLOP/s | tee $O/table.txt
for c in $CFGS; do IFS=: read d m k <<< "$c"
  ent=$([ $m = full ] && echo $((8192 * 8192)) || echo $((8192 * 8193 / 2)))
  printf "%-10s %4s %6s %8s\n" $m $d $k $(tflops $((4 * d * 32 * ent)) "$(ms_of $O/big_${d}_${m}_$k.log forward)") | tee -a $O/table.txt
done
left_s=$((585 - $(el)))
if [ $left_s -gt 120 ]; then
  GPU_TEST_ONLY="gpu_attention_sm80 gpu_attention_no_decode memcheck_sm80 gpu_block_mask gpu_decode gpu_decode_cp_async gpu_cp gpu_library_mods python_gpu" \
    timeout $left_s bash scripts/gpu_test.sh > $O/gpu_test2.txt 2>&1; echo "gpu-test part 2 rc=$? ($(el) s)"
  tail -13 $O/gpu_test2.txt
fi
cat $O/table.txt
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null)
