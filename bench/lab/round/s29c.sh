#!/usr/bin/env bash
# Prepared in session 28 (no GPU left): FLEXATTN_SM90_PAD_HEAD_DIM=1, head dims between the sm90 forward's compiled
# ones on the kernel of the next one up (TMA zero-fills the columns past d, the O map drops them). Never run on a GPU.
# 1. Correctness: gpu_attention_check --quick with it on (its D 96 / 80+112 / 160 cases), then `run --check` at odd
#    shapes (FLEXATTN_JIT_DEBUG: no "using the sm80 kernels" line may appear, or the sm90 path was not taken).
# 2. Speed: B=2 H=16 S=8192 bf16 forward ms, off (sm80 family) / on / on / off: D=96 full and causal, D=80 causal,
#    D=160 causal. Predicted: on = the D=128 (D=192) kernel's time, i.e. ~75 % of its TFLOP/s counted at the call's D,
#    ~1.4-2x the sm80 family's.
. "$(dirname "$0")/lib.sh"
out_dir s29c; L=$O
deadline ${S29C_DEADLINE:-400}
build_gpu $O flexattn gpu_attention_check
export FLEXATTN_SM90_PAD_HEAD_DIM=1
quick_check 120
grep -E "L=(385|129|300) .*D=(96|160|80) " $O/check.log | head -6
export FLEXATTN_JIT_DEBUG=1
pad_check() {  # run_check, then whether the sm90 path declined the call (FLEXATTN_JIT_DEBUG's line)
  run_check "$@"
  grep -q "using the sm80 kernels" $O/run.log && echo "DECLINED (sm80 ran): $* -- $(grep -m1 'using the sm80' $O/run.log)"
  true
}
pad_check --dtype bf16 -Q 1000 -D 96 --mask causal
pad_check --dtype f16 -Q 129 --kv 4097 -D 96 --dv 64 --score softcap:30
pad_check --dtype bf16 -Q 777 -D 80 --hkv 2 --mask document:3 --score alibi
pad_check --dtype bf16 -Q 300 -D 96 --dv 64 --mask sliding_window:100 --backward
pad_check --dtype bf16 -Q 300 -D 112 --mask sliding_window:100
pad_check --dtype bf16 -Q 1000 -D 160 --mask causal
pad_check --dtype bf16 -Q 255 -D 240 --score relbias
run_check_summary
unset FLEXATTN_JIT_DEBUG
for spec in "96 full" "96 causal" "80 causal" "160 causal"; do
  set -- $spec; d=$1; mask=$2; margs=(); [ $mask = causal ] && margs=(--mask causal)
  row="D=$d $mask |"
  for v in 0 1 1 0; do
    log=$O/t_${d}_${mask}_$v.log
    FLEXATTN_SM90_PAD_HEAD_DIM=$v timeout $(cap 60 5) $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D $d \
      "${margs[@]}" > $log 2>&1
    row="$row $v:$(ms_of $log forward)"
  done
  echo "$row"
done
echo "(forward ms, FLEXATTN_SM90_PAD_HEAD_DIM off on on off)"
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
