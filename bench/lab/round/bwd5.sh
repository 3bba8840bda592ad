#!/usr/bin/env bash
# Helper "bwd5" (issue 6): GPU check of FLEXATTN_SM90_BWD_V3=1 (the default v2 + bulk dQ kernel at D=128 with
# its dQ tile added by 4 TMA tensor reductions per tile instead of 64 per-row bulk reductions;
# docs/kernels_sm90.md "Backward v3"). ~95 s typical, <= 114 s worst case (every step has its own timeout):
#  1. prewarm: the short suite's 8 kernel sets, default and v3, in parallel (the set key does not depend on
#     B/H/S; the document divisor 256 is S=2048's, which the S=8192 runs below do not use);
#  2. gpu_attention_check --quick with the switch on (every D=128 backward runs the v3 main kernel);
#  3. `flexattn bench --suite short --backend cuda` without and with the switch;
#  4. S=8192 B=2 H=16 D=128 dense and causal, `flexattn run --backward` (median of 5 calls), both ways;
#  5. a table LAST: check pass/fail, then case | default bwd | v3 bwd (TFLOP/s) | ratio.
# Run from the repo root on the device; $OUT writable; build-gpu/ configured and built.
set -u
cd "$(dirname "$0")/../../.."
export FLEXATTN_CACHE_DIR=$PWD/build-gpu/kernel-cache
O=${OUT:-/tmp}/bwd5
mkdir -p "$O"
CHECK=build-gpu/tests/gpu/attention/gpu_attention_check
B=build-gpu/tools/flexattn
T0=$(date +%s)
v3() { FLEXATTN_SM90_BWD_V3=1 "$@"; }

# 1. prewarm (one background process per case and setting)
warm() {  # $1 = 0 (defaults) | 1 (v3), rest = flags
  local v=$1; shift
  if [ $v = 1 ]; then
    v3 timeout 22 $B run -B 1 -H 2 -Q 256 -D 128 --dtype bf16 --backend cuda --backward "$@" > "$O/warm_${v}_$RANDOM.log" 2>&1
  else
    timeout 22 $B run -B 1 -H 2 -Q 256 -D 128 --dtype bf16 --backend cuda --backward "$@" > "$O/warm_${v}_$RANDOM.log" 2>&1
  fi
}
for v in 0 1; do
  warm $v &
  warm $v --mask causal &
  warm $v --mask sliding_window:1023 &
  warm $v --mask-expr "q_idx // 256 == kv_idx // 256 && q_idx >= kv_idx" &
  warm $v --mask prefix_lm:512 &
  warm $v --mask causal --score alibi &
  warm $v --mask causal --score softcap:30 &
  warm $v --score relbias &
done
wait
echo "prewarm done after $(( $(date +%s) - T0 )) s"

# 2. correctness of the v3 path
v3 env FLEXATTN_JIT_DEBUG=1 timeout 38 $CHECK --quick > "$O/check_v3.log" 2>&1
CHECK_RC=$?
PASS=$(grep -c "^PASS" "$O/check_v3.log")
FAIL=$(grep -c "^FAIL" "$O/check_v3.log")
DECL=$(grep -c "backward:" "$O/check_v3.log")
echo "check done after $(( $(date +%s) - T0 )) s"

# 3. short suite, same call with and without the switch
timeout 13 $B bench --suite short --backend cuda > "$O/bench_default.log" 2>&1; RC0=$?
v3 timeout 13 $B bench --suite short --backend cuda > "$O/bench_v3.log" 2>&1; RC1=$?
echo "bench done after $(( $(date +%s) - T0 )) s"

# 4. S=8192 dense and causal (bwd flops = 2.5 * 4 D * attended entries; causal S(S+1)/2 per head)
big() {  # $1 = 0 | 1, $2 = tag, rest = flags
  local v=$1 tag=$2; shift 2
  local log="$O/s8k_${tag}_${v}.log"
  if [ $v = 1 ]; then
    v3 timeout 7 $B run -B 2 -H 16 -Q 8192 -D 128 --dtype bf16 --backend cuda --backward "$@" > "$log" 2>&1
  else
    timeout 7 $B run -B 2 -H 16 -Q 8192 -D 128 --dtype bf16 --backend cuda --backward "$@" > "$log" 2>&1
  fi
  awk -v tag=$tag '/^backward \(cuda\)/ { ms = $3; e = 2 * 16 * 8192.0 * (tag == "causal" ? 8193 / 2.0 : 8192.0);
       printf "%.0f", 2.5 * 4 * 128 * e / (ms * 1e9) }' "$log"
}
S8D0=$(big 0 dense); S8D1=$(big 1 dense); S8C0=$(big 0 causal --mask causal); S8C1=$(big 1 causal --mask causal)
echo "s8k done after $(( $(date +%s) - T0 )) s"

# 5. table (last)
echo "==== bwd5 v3 (TMA dQ reduce): gpu_attention_check --quick rc=$CHECK_RC PASS $PASS FAIL $FAIL (sm80 fallbacks: $DECL lines)"
grep "^FAIL" "$O/check_v3.log" | head -3
echo "==== bwd TFLOP/s; short = B=4 H=16 S=2048 D=128 (rc=$RC0/$RC1), s8k = B=2 H=16 S=8192 D=128"
printf "%-16s %12s %12s %6s\n" case "default bwd" "v3 bwd" "x"
{ awk 'FNR == 1 { f++ } f == 1 && NF == 8 && $8 ~ /^[0-9]+$/ { d[$1] = $8; order[++n] = $1 }
     f == 2 && NF == 8 && $8 ~ /^[0-9]+$/ { v[$1] = $8 }
     END { for (i = 1; i <= n; i++) { c = order[i]; print c, d[c], (c in v) ? v[c] : "-" } }' \
  "$O/bench_default.log" "$O/bench_v3.log"
  echo "s8k_dense ${S8D0:--} ${S8D1:--}"; echo "s8k_causal ${S8C0:--} ${S8C1:--}"; } |
  awk '{ x = ($2 > 0 && $3 > 0) ? sprintf("%.2f", $3 / $2) : "-"; printf "%-16s %12s %12s %6s\n", $1, $2, $3, x }'
