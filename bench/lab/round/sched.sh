#!/usr/bin/env bash
# GPU check of wip/sched (issue 5; budget 100 s): the persistent sm90 forward (FLEXATTN_SM90_PERSISTENT=1) takes
# its work tiles from a tile queue (one atomicAdd per tile by the producer; a self-resetting counter word per
# (device, stream) that the runtime owns). FLEXATTN_SM90_TILE_QUEUE=0 keeps the static stride (the kernel before
# this branch, same binary) for the A/B column. The default (non-persistent) kernel's SASS is unchanged.
#  1. correctness: gpu_attention_check --quick with the persistent kernel, once on a grid capped to 3 CTAs
#     (FLEXATTN_SM90_PERSISTENT_CTAS=3: every CTA takes many tiles from the queue; the quick shapes have fewer
#     tiles than SMs) and once on the normal grid (what the brief asks for);
#  2. flexattn bench --suite short (B=4 H=16 S=2048 D=128): default vs persistent queue, fwd TFLOP/s;
#  3. S=8192 (B=2 H=16 D=128, forward only, `flexattn run`, median of 5): causal default vs queue (the out / lse
#     sums must be equal: same per-tile code, 2048 tiles over 132 CTAs through the queue), then the queue on
#     sliding, prefix-LM and document -- the rows of `--suite full` the targets name, without its backward;
#  4. if time is left: --suite short with the static stride (FLEXATTN_SM90_TILE_QUEUE=0).
# Defaults at S=8192 D=128 (bench/RESULTS.md): full 608 causal 556 sliding 384 document 295 prefixlm 557.
# Logs in $OUT/sched/.
. "$(dirname "$0")/lib.sh"
out_dir sched
L=$O
deadline 95
P="env FLEXATTN_SM90_PERSISTENT=1"

$P FLEXATTN_SM90_PERSISTENT_CTAS=3 timeout 50 $CHECK --quick > "$L/check_cap3.log" 2>&1
c3=$?
$P timeout $(cap 12 1) $CHECK --quick > "$L/check.log" 2>&1
c1=$?
$P timeout $(cap 22 1) $F bench --suite short --backend cuda > "$L/short_queue.log" 2>&1
timeout $(cap 12 1) $F bench --suite short --backend cuda > "$L/short_default.log" 2>&1
R="-B 2 -H 16 -Q 8192 -D 128 --dtype bf16 --backend cuda"
run8k() {  # name, mode (default|queue), mask flags...
  local name=$1 mode=$2; shift 2
  local t; t=$(cap 14 1)
  [ "$t" -lt 4 ] && return
  if [ "$mode" = queue ]; then $P timeout $t $F run $R "$@" > "$L/run8k_${name}_$mode.log" 2>&1
  else timeout $t $F run $R "$@" > "$L/run8k_${name}_$mode.log" 2>&1; fi
}
run8k causal default --mask causal
run8k causal queue --mask causal
run8k sliding1024 queue --mask sliding_window:1023
run8k prefixlm queue --mask prefix_lm:2048
run8k document queue --mask-expr "q_idx // 1024 == kv_idx // 1024 && q_idx >= kv_idx"
t=$(left)
[ "$t" -gt 5 ] && $P FLEXATTN_SM90_TILE_QUEUE=0 timeout $t $F bench --suite short --backend cuda > "$L/short_static.log" 2>&1
touch "$L/short_static.log"

fwd() { awk -v c="$1" '$1 == c && $2 == "4x16x2048" && $3 == 128 { print $6; exit }' "$2" 2>/dev/null; }
# TFLOP/s at S=8192 from the forward ms: 4 * D flops per attended entry, entries per (b, h) by mask.
tf8k() {
  local f="$L/run8k_$1_$2.log"
  [ -f "$f" ] || return
  local S=8192 n=0 ms; ms=$(ms_of "$f" forward)
  case $1 in
    causal) n=$(( S * (S + 1) / 2 ));;
    sliding1024) n=$(( 1024 * 1025 / 2 + (S - 1024) * 1024 ));;
    prefixlm) n=$(( 2048 * 2048 + (S * (S + 1) / 2 - 2048 * 2049 / 2) ));;
    document) n=$(( 8 * 1024 * 1025 / 2 ));;
  esac
  [ -n "$ms" ] && tflops $(( 4 * 128 * n * 32 )) "$ms"
}
sums() { sed -n 's/^\(out\|lse\) .* sum \([^ ]*\) .*/\1 \2/p' "$1" 2>/dev/null | xargs; }
echo "==== sched: FLEXATTN_SM90_PERSISTENT=1 gpu_attention_check --quick (rc cap3=$c3 grid=$c1)"
echo "cap3: $(pass_fail "$L/check_cap3.log");" "grid: $(pass_fail "$L/check.log")"
grep -h '^FAIL' "$L/check_cap3.log" "$L/check.log" | head -3
echo "S=8192 causal sums default: $(sums "$L/run8k_causal_default.log") | queue: $(sums "$L/run8k_causal_queue.log")"
echo "==== fwd TFLOP/s D=128 (static = persistent before this branch; dflt8192 from RESULTS.md, (run) = this run)"
printf "%-15s %8s %8s %8s | %8s %8s\n" case dflt2048 stat2048 queue2048 dflt8192 queue8192
d8=(608 556 384 295 557 460 177 211)
i=0
for c in full causal sliding1024 document prefixlm alibi_causal softcap_causal relbias_full; do
  d=${d8[$i]}
  [ "$c" = causal ] && [ -n "$(tf8k causal default)" ] && d="$(tf8k causal default)(run)"
  printf "%-15s %8s %8s %8s | %8s %8s\n" "$c" "$(fwd $c "$L/short_default.log")" "$(fwd $c "$L/short_static.log")" \
    "$(fwd $c "$L/short_queue.log")" "$d" "$(tf8k $c queue)"
  i=$((i + 1))
done
