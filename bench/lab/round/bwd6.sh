#!/usr/bin/env bash
# Helper "s6-bwd": GPU check of FLEXATTN_SM90_BWD_PERSISTENT=1 (the persistent sm90 backward main kernel:
# one CTA per SM over (kv tile, kv head, kv batch) work tiles from the tile queue; docs/kernels_sm90.md,
# "Persistent backward"). Budget <= 150 s (every step has its own timeout; timing stops at 140 s):
#  1. in parallel (<= 60 s):
#     a. gpu_attention_check --quick with the switch on and FLEXATTN_SM90_PERSISTENT_CTAS=3, so every CTA
#        runs many work tiles (tile loop, kv_empty / bar_kv phases, the ring and the dQ writer across
#        tiles, queue word reset; the cap also applies to the persistent forward, which is fine);
#     b. `flexattn run --check --backward` with the switch on, CTAs capped at 7, B=2 H=4 (GQA 2) Q=KV=1000
#        (8 kv tiles x 2 heads x 2 batches = 32 work tiles): causal, document, sliding_window at D 64 / 128,
#        alibi+causal (buffer grads of nothing) and relbias (learnable bias: buffer gradients per warp);
#     c. prewarm of every kernel set the timing needs (tiny shapes), default and persistent;
#  2. timing, sequential: B=2 H=16 S=8192 bf16 backward, default then persistent, per case;
#  3. a table LAST: correctness counts, then bwd ms / TFLOP/s default vs persistent.
# Run from the repo root on the device; $OUT writable; build-gpu/ configured and built.
. "$(dirname "$0")/lib.sh"
out_dir bwd6
P="env FLEXATTN_SM90_BWD_PERSISTENT=1"
DOC="q_idx // 1024 == kv_idx // 1024 && q_idx >= kv_idx"   # bench's document: 8 causal documents at S=8192
DOCS="q_idx // 256 == kv_idx // 256 && q_idx >= kv_idx"    # the same shape at Q=1000

# 1a. quick check, many tiles per CTA
$P FLEXATTN_SM90_PERSISTENT_CTAS=3 FLEXATTN_JIT_DEBUG=1 timeout 58 $CHECK --quick > "$O/check_quick.log" 2>&1 &
CHECK_PID=$!
# 1b. run --check, 32 work tiles on 7 CTAs
i=0
for d in 64 128; do
  for m in "--mask causal" "--mask sliding_window:200" "--mask-expr DOCS" "--mask causal --score alibi" "--score relbias"; do
    i=$((i + 1))
    if [ "$m" = "--mask-expr DOCS" ]; then
      $P FLEXATTN_SM90_PERSISTENT_CTAS=7 FLEXATTN_JIT_DEBUG=1 timeout 58 $F run -B 2 -H 4 --hkv 2 -Q 1000 -D $d \
        --dtype bf16 --mask-expr "$DOCS" --backend cuda --check --backward > "$O/runcheck_$i.log" 2>&1 &
    else
      $P FLEXATTN_SM90_PERSISTENT_CTAS=7 FLEXATTN_JIT_DEBUG=1 timeout 58 $F run -B 2 -H 4 --hkv 2 -Q 1000 -D $d \
        --dtype bf16 $m --backend cuda --check --backward > "$O/runcheck_$i.log" 2>&1 &
    fi
  done
done
# 1c. prewarm (a set's source does not depend on B, H, S)
warm() {  # $1 = 0 | 1 (persistent), $2 = D, rest = mod flags
  local v=$1 d=$2; shift 2
  FLEXATTN_SM90_BWD_PERSISTENT=$v timeout 55 $F run -B 1 -H 2 -Q 256 -D $d --dtype bf16 --backend cuda --backward \
    "$@" > "$O/warm_${v}_d${d}_$RANDOM.log" 2>&1
}
for v in 0 1; do
  warm $v 128 &
  warm $v 128 --mask causal &
  warm $v 128 --mask sliding_window:1023 &
  warm $v 128 --mask-expr "$DOC" &
  warm $v 128 --mask causal --score alibi &
  warm $v 64 &
  warm $v 64 --mask causal &
done
wait $CHECK_PID; CHECK_RC=$?
wait
echo "correctness + prewarm done after $(el) s"

# 2. timing (sequential), default then persistent per case
# Most telling first (short loops): a run that would end past ~150 s is skipped.
cases=("sliding1024|128|--mask sliding_window:1023" "document|128|DOC" "causal|128|--mask causal"
       "alibi_causal|128|--mask causal --score alibi" "full|128|" "causal_d64|64|--mask causal" "full_d64|64|")
for c in "${cases[@]}"; do
  IFS='|' read -r name d flags <<< "$c"
  for v in 0 1; do
    [ $(el) -ge 139 ] && { echo "time budget: skipped $name/$v"; continue; }
    if [ "$flags" = DOC ]; then
      FLEXATTN_SM90_BWD_PERSISTENT=$v timeout 11 $F run -B 2 -H 16 -Q 8192 -D $d --dtype bf16 --backend cuda \
        --backward --mask-expr "$DOC" > "$O/time_${name}_$v.log" 2>&1
    else
      FLEXATTN_SM90_BWD_PERSISTENT=$v timeout 11 $F run -B 2 -H 16 -Q 8192 -D $d --dtype bf16 --backend cuda \
        --backward $flags > "$O/time_${name}_$v.log" 2>&1
    fi
  done
done
echo "timing done after $(el) s"

# 3. table (last)
ok=0; bad=0
for f in "$O"/runcheck_*.log; do
  if grep -q "^check: ok" "$f"; then ok=$((ok + 1)); else bad=$((bad + 1)); echo "FAILED: $f: $(grep -m1 -E 'FAIL|rror|Killed' "$f")"; fi
done
PERS=$(grep -lE "attn_bwd_sm90<FlexVariant, [a-z0-9]+, [0-9]+, [0-9]+, [a-z]+, [a-z]+, [a-z]+, true>" \
  "$FLEXATTN_CACHE_DIR"/*/source.cu 2>/dev/null | wc -l)
echo "==== bwd6: gpu_attention_check --quick, PERSISTENT=1, 3 CTAs (rc=$CHECK_RC): $(pass_fail "$O/check_quick.log")"
grep "^FAIL" "$O/check_quick.log" | head -3
echo "==== run --check --backward, PERSISTENT=1, 7 CTAs, 32 work tiles (D 64/128 x causal/sliding/doc/alibi/relbias): ok $ok, failed $bad; persistent bwd sources in cache: $PERS"
echo "==== B=2 H=16 S=8192 bf16 backward: default -> PERSISTENT=1 (TFLOP/s = 10 D x attended entries / time)"
printf "%-14s %9s %9s %7s %7s %6s\n" case "ms def" "ms pers" "TF def" "TF pers" ratio
for c in "${cases[@]}"; do
  IFS='|' read -r name d flags <<< "$c"
  a=$(ms_of "$O/time_${name}_0.log" backward)
  b=$(ms_of "$O/time_${name}_1.log" backward)
  # attended entries per (b, h) at S=8192: full S^2; causal S(S+1)/2; sliding 1024 keys (q+1 below);
  # document 8 x 1024 x 1025 / 2
  S=8192; ent=$(( S * S ))
  case $name in *causal*) ent=$(( S * (S + 1) / 2 ));; sliding1024) ent=$(( 1024 * S - 1024 * 1023 / 2 ));;
    document) ent=$(( 8 * 1024 * 1025 / 2 ));; esac
  ent=$(( ent * 32 ))  # B H
  tf() { tflops $(( 10 * d * ent )) "$1"; }
  r=$([ -n "$a" ] && [ -n "$b" ] && awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", a / b }' || echo "-")
  printf "%-14s %9s %9s %7s %7s %6s\n" "$name" "${a:--}" "${b:--}" "$(tf "$a")" "$(tf "$b")" "$r"
done
