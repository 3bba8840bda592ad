#!/usr/bin/env bash
# GPU check of wip/sched (issue 5; budget 100 s): the persistent sm90 forward (FLEXATTN_SM90_PERSISTENT=1) takes
# its work tiles from a global tile queue (one atomicAdd per tile by the producer, self-resetting counter in a
# runtime-owned per-(device, stream) word) instead of a static stride. FLEXATTN_SM90_TILE_QUEUE=0 keeps the
# static stride (the kernel before this branch, same binary) for the A/B column.
#  1. correctness: gpu_attention_check --quick with the persistent kernel, once on a grid capped to 3 CTAs
#     (FLEXATTN_SM90_PERSISTENT_CTAS=3: every CTA takes several tiles from the queue; the quick cases have
#     fewer tiles than SMs) and once on the normal grid;
#  2. flexattn bench --suite short: default vs persistent (queue) vs persistent static, fwd TFLOP/s;
#  3. --suite full's first rows (S=8192 D=128) with the persistent queue, while the budget lasts.
# Defaults at S=8192 D=128 (bench/RESULTS.md): full 608 causal 556 sliding 384 document 295 prefixlm 557.
# Logs in $OUT/sched/.
set -u
cd "$(dirname "$0")/../../.."
export FLEXATTN_CACHE_DIR=$PWD/build-gpu/kernel-cache
L=${OUT:-/tmp}/sched
mkdir -p "$L"
CHECK=build-gpu/tests/gpu/attention/gpu_attention_check
B=build-gpu/tools/flexattn
t0=$(date +%s)
left() { echo $(( 95 - ($(date +%s) - t0) )); }

FLEXATTN_SM90_PERSISTENT=1 FLEXATTN_SM90_PERSISTENT_CTAS=3 timeout 40 $CHECK --quick > "$L/check_cap3.log" 2>&1
c3=$?
FLEXATTN_SM90_PERSISTENT=1 timeout 15 $CHECK --quick > "$L/check.log" 2>&1
c1=$?
FLEXATTN_SM90_PERSISTENT=1 timeout 20 $B bench --suite short --backend cuda > "$L/short_queue.log" 2>&1
timeout 15 $B bench --suite short --backend cuda > "$L/short_default.log" 2>&1
t=$(( $(left) - 12 ))
[ $t -gt 5 ] && FLEXATTN_SM90_PERSISTENT=1 timeout $t $B bench --suite full --backend cuda > "$L/full_queue.log" 2>&1
t=$(left)
[ $t -gt 4 ] && FLEXATTN_SM90_PERSISTENT=1 FLEXATTN_SM90_TILE_QUEUE=0 timeout $t $B bench --suite short --backend cuda > "$L/short_static.log" 2>&1
touch "$L/full_queue.log" "$L/short_static.log"

fwd() { awk -v c="$1" -v s="$2" '$1 == c && $2 == s && $3 == 128 { print $6; exit }' "$3"; }
echo "==== sched: FLEXATTN_SM90_PERSISTENT=1 gpu_attention_check --quick (rc cap3=$c3 grid=$c1)"
echo "cap3: PASS $(grep -c '^PASS' "$L/check_cap3.log") FAIL $(grep -c '^FAIL' "$L/check_cap3.log");" \
     "grid: PASS $(grep -c '^PASS' "$L/check.log") FAIL $(grep -c '^FAIL' "$L/check.log")"
grep -h '^FAIL' "$L/check_cap3.log" "$L/check.log" | head -3
echo "==== fwd TFLOP/s, D=128 (static = persistent before this branch; S=8192 default from RESULTS.md)"
printf "%-15s %8s %8s %8s | %8s %8s\n" case dflt2048 stat2048 queue2048 dflt8192 queue8192
d8=(608 556 384 295 557 460 177 211)
i=0
for c in full causal sliding1024 document prefixlm alibi_causal softcap_causal relbias_full; do
  printf "%-15s %8s %8s %8s | %8s %8s\n" "$c" "$(fwd $c 4x16x2048 "$L/short_default.log")" \
    "$(fwd $c 4x16x2048 "$L/short_static.log")" "$(fwd $c 4x16x2048 "$L/short_queue.log")" "${d8[$i]}" \
    "$(fwd $c 2x16x8192 "$L/full_queue.log")"
  i=$((i + 1))
done
