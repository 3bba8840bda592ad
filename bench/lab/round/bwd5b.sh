#!/usr/bin/env bash
# Helper "bwd5b": GPU check of FLEXATTN_SM90_BWD_V3=1, now on both bulk dQ kernels: the v2 kernel at D=128
# (4 TMA tensor reductions per dQ tile) and the first kernel at D=64 (2 per tile, two swizzled buffers;
# docs/kernels_sm90.md "Backward v3"). Replaces bwd5.sh, whose bench steps (timeout 13) were killed after
# 3-4 cases and whose S=8192 runs (timeout 7) died in host input generation.
# Budget <= 120 s worst case (each step has its own timeout; the optional step 4 only runs in what is left):
#  1. prewarm the 8 short-suite kernel sets at D=128 and D=64, default and v3 (32 processes; the headers
#     changed, so every set compiles), IN PARALLEL with gpu_attention_check --quick under v3 (its own
#     variants, D=64 and D=128 backward on the v3 kernels; correctness does not depend on timing). <= 55 s
#  2. `flexattn bench --suite short` (D=128) default, then v3;                                   <= 2 x 15 s
#  3. `flexattn bench --suite short64` (D=64) default, then v3;                                  <= 2 x 15 s
#  4. only if >= 24 s are left: B=2 H=16 S=8192 D=64 dense --backward, default and v3 (median of the runs
#     after the first; the host input generation alone is several seconds);
#  5. a table LAST (<= 15 lines): check pass/fail, then per case default / v3 bwd TFLOP/s and ratio, D=128 | D=64.
# Run from the repo root on the device; $OUT writable; build-gpu/ configured and built.
. "$(dirname "$0")/lib.sh"
out_dir bwd5b
deadline 117

# 1. prewarm (one background process per case, head dim and setting) next to the v3 correctness check.
#    The v3 processes start 6 s later: by then most forward sets (shared by both settings) are on disk.
warm() {  # $1 = 0 (defaults) | 1 (v3), $2 = D, rest = flags
  local v=$1 d=$2; shift 2
  [ $v = 1 ] && sleep 6
  FLEXATTN_SM90_BWD_V3=$v timeout $(( 52 - 6 * v )) $F run -B 1 -H 2 -Q 256 -D $d --dtype bf16 --backend cuda \
    --backward "$@" > "$O/warm_${v}_d${d}_$RANDOM.log" 2>&1
}
FLEXATTN_SM90_BWD_V3=1 FLEXATTN_JIT_DEBUG=1 timeout 55 $CHECK --quick > "$O/check_v3.log" 2>&1 &
CHECK_PID=$!
for d in 128 64; do
  for v in 0 1; do short_cases warm $v $d; done
done
wait $CHECK_PID
CHECK_RC=$?
echo "check done after $(el) s"
wait
echo "prewarm done after $(el) s"
DECL=$(grep -c "backward:" "$O/check_v3.log")
D64=$(grep -cE "^PASS.* D=64 " "$O/check_v3.log")
WARMFAIL=$(grep -lE "rror|Killed" "$O"/warm_*.log 2>/dev/null | wc -l)

# 2.-3. short suites, the same call without and with the switch (about 8-10 s each when cached)
for s in short short64; do
  FLEXATTN_SM90_BWD_V3=0 timeout 15 $F bench --suite $s --backend cuda > "$O/bench_${s}_default.log" 2>&1
  echo "rc=$?" >> "$O/bench_${s}_default.log"
  FLEXATTN_SM90_BWD_V3=1 timeout 15 $F bench --suite $s --backend cuda > "$O/bench_${s}_v3.log" 2>&1
  echo "rc=$?" >> "$O/bench_${s}_v3.log"
  echo "bench $s done after $(el) s"
done

# 4. S=8192 D=64 dense, only in the time left (bwd flops = 2.5 * 4 D * B H S^2)
LEFT=$(left)
S8_0=-; S8_1=-
if [ $LEFT -ge 24 ]; then
  for v in 0 1; do
    FLEXATTN_SM90_BWD_V3=$v timeout $(( LEFT / 2 )) $F run -B 2 -H 16 -Q 8192 -D 64 --dtype bf16 --backend cuda \
      --backward > "$O/s8k_d64_${v}.log" 2>&1
    r=$(tflops $(( 10 * 64 * 2 * 16 * 8192 * 8192 )) "$(ms_of "$O/s8k_d64_${v}.log" backward)")
    [ $v = 0 ] && S8_0=$r || S8_1=$r
  done
  echo "s8k done after $(el) s"
else
  echo "s8k skipped: $LEFT s left"
fi

# 5. table (last, <= 15 lines)
rcs() { tail -1 "$O/bench_$1_default.log" | tr -d 'rc=\n'; printf /; tail -1 "$O/bench_$1_v3.log" | tr -d 'rc=\n'; }
echo "==== bwd5b v3 (TMA dQ reduce: D=128 v2 kernel, D=64 first kernel), $(el) s total"
echo "gpu_attention_check --quick (v3) rc=$CHECK_RC $(pass_fail "$O/check_v3.log") (D=64 PASS $D64; sm80 fallbacks $DECL; prewarm logs with errors $WARMFAIL)"
grep "^FAIL" "$O/check_v3.log" | head -1
echo "==== bwd TFLOP/s, B=4 H=16 S=2048 bf16 (rc short $(rcs short), short64 $(rcs short64)); x = v3 / default"
awk 'function val(f, c) { return ((f, c) in T) ? T[f, c] : "-" }
     function x(a, b) { return (a > 0 && b > 0) ? sprintf("%.2f", b / a) : "-" }
     FNR == 1 { f++ }
     NF == 8 && $8 ~ /^[0-9]+$/ { T[f, $1] = $8; if (f == 1) order[++n] = $1 }
     END { printf "%-16s %9s %9s %5s | %9s %9s %5s\n", "case", "D128 def", "D128 v3", "x", "D64 def", "D64 v3", "x"
           for (i = 1; i <= n; i++) { c = order[i]
             printf "%-16s %9s %9s %5s | %9s %9s %5s\n", c, val(1, c), val(2, c), x(val(1, c), val(2, c)),
                    val(3, c), val(4, c), x(val(3, c), val(4, c)) } }' \
  "$O/bench_short_default.log" "$O/bench_short_v3.log" "$O/bench_short64_default.log" "$O/bench_short64_v3.log"
awk -v a="$S8_0" -v b="$S8_1" 'BEGIN { printf "%-16s %9s %9s %5s | %9s %9s %5s\n", "s8k_dense B2H16", "", "", "", a, b,
  (a > 0 && b > 0) ? sprintf("%.2f", b / a) : "-" }'
