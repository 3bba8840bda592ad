#!/usr/bin/env bash
# Helper "relbias5" (issue 6): GPU check of FLEXATTN_SM90_BWD_BG_REDUCE=1 (buffer gradients whose index
# depends on the positions only through q_idx - kv_idx, or not at all, summed per warp before one atomic
# per diagonal; kernels/sm90/bwd_buffer_grad_sm90.cuh), ~80 s (every step has its own timeout):
#  1. in parallel (the compiles dominate; ~16 cores): `flexattn run --check --backward` with the switch
#     on for relbias / t5 / t5:16:64+causal at D 64 and 128 (GQA, odd lengths 257 x 300: edge tiles,
#     interior tiles), `gpu_attention_check --quick --only learnable` with the switch on (relbias and
#     alibi_slopes with gradients, offsets), and the kernel sets the timing needs (tiny shapes: a set's
#     source does not depend on B, H, S);
#  2. timing, sequential: B=2 H=16 S=8192 D=128 bf16 relative bias backward, switch off (today's
#     kernel), on, and with a constant bias (relbias:const: no buffer gradient), twice each;
#  3. a table LAST: correctness counts, then bwd ms / TFLOP/s per setting.
# Run from the repo root on the device; $OUT writable; build-gpu/ configured and built.
. "$(dirname "$0")/lib.sh"
out_dir relbias5
on() { FLEXATTN_SM90_BWD_BG_REDUCE=1 "$@"; }

# 1. correctness (switch on) and prewarm, all in parallel
for d in 64 128; do
  for s in "relbias" "t5" "t5:16:64 --mask causal"; do
    f="$O/check_d${d}_$(echo $s | tr -c 'a-z0-9' '_').log"
    on timeout 60 $F run -B 2 -H 4 --hkv 2 -Q 257 --kv 300 -D $d --dtype bf16 --score $s --backend cuda \
      --check --backward > "$f" 2>&1 &
  done
done
FLEXATTN_JIT_DEBUG=1 on timeout 60 $CHECK --quick --only learnable > "$O/gpu_check.log" 2>&1 &
CHECK_PID=$!
warm() { timeout 60 "$@" -B 1 -H 16 -Q 256 -D 128 --dtype bf16 --backend cuda --backward > "$O/warm_$RANDOM.log" 2>&1; }
warm $F run --score relbias &
on warm $F run --score relbias &
warm $F run --score relbias:const &
wait $CHECK_PID; CHECK_RC=$?
wait
echo "correctness + prewarm done after $(el) s"

# 2. timing (sequential, one GPU process at a time)
TIME="-B 2 -H 16 -Q 8192 -D 128 --dtype bf16 --backend cuda --backward"
for rep in 1 2; do
  timeout 25 $F run $TIME --score relbias > "$O/time_off_$rep.log" 2>&1
  on timeout 25 $F run $TIME --score relbias > "$O/time_on_$rep.log" 2>&1
  timeout 25 $F run $TIME --score relbias:const > "$O/time_const_$rep.log" 2>&1
  echo "timing rep $rep done after $(el) s"
done
grep -l "FLEXATTN_SM90_BWD_BG_REDUCE 1" "$FLEXATTN_CACHE_DIR"/*/source.cu 2>/dev/null > "$O/bg_sources.txt"

# 3. table (last)
ok=0; bad=0
for f in "$O"/check_d*.log; do
  if grep -q "^check: ok" "$f"; then ok=$((ok + 1)); else bad=$((bad + 1)); echo "FAILED: $f: $(grep -m1 -E 'FAIL|error|rror' "$f")"; fi
done
echo "==== relbias5: flexattn run --check --backward (switch on, relbias/t5/t5:16:64+causal x D 64/128): ok $ok, failed $bad"
echo "==== gpu_attention_check --quick --only learnable (switch on) rc=$CHECK_RC: $(pass_fail "$O/gpu_check.log"); kernel sources with the switch in the cache: $(wc -l < "$O/bg_sources.txt")"
grep "^FAIL" "$O/gpu_check.log" | head -3
echo "==== B=2 H=16 S=8192 D=128 bf16 relbias backward (TFLOP/s = 2.5 * 4 B H S^2 D / time)"
printf "%-34s %10s %10s\n" setting "bwd ms" "TFLOP/s"
for k in off on const; do
  for rep in 1 2; do
    ms=$(ms_of "$O/time_${k}_$rep.log" backward)
    label=$k; [ $k = off ] && label="learnable, switch off (before)"; [ $k = on ] && label="learnable, switch on (after)"
    [ $k = const ] && label="relbias:const (no bias grad)"
    if [ -n "$ms" ]; then
      printf "%-34s %10s %10.0f\n" "$label #$rep" "$ms" "$(awk -v m="$ms" 'BEGIN { print 2748.779 / m }')"
    else
      printf "%-34s %10s %10s\n" "$label #$rep" "-" "rc?"
    fi
  done
done
