#!/usr/bin/env bash
# Helper "bwd" (issue 6): GPU check of the opt-in sm90 backward v2 (FLEXATTN_SM90_BWD_V2=1 with
# FLEXATTN_SM90_BWD_DQ_BULK=1: FA3's schedule + its one-buffer bulk dQ, 24 / 240 registers;
# docs/kernels_sm90.md "Backward v2"), ~100 s (each step has its own timeout; fits r15.sh's BUDGET_EACH=110):
#  1. prewarm: the kernel sets of the short suite's 8 cases, default and v2, compiled in parallel
#     (tiny shapes: the set key does not depend on B/H/S; the document divisor 256 is S=2048's);
#  2. gpu_attention_check --quick with the switch on (every backward case runs the v2 main kernel);
#  3. `flexattn bench --suite short --backend cuda` without and with the switch (same call);
#  4. a table LAST: check pass/fail, then case | default bwd | v2 bwd (TFLOP/s).
# Run from the repo root on the device; $OUT writable; build-gpu/ configured and built.
. "$(dirname "$0")/lib.sh"
out_dir bwd

# 1. prewarm (background processes, one per case and setting; ~16 cores)
warm() {  # $1 = 0 (the defaults) | 1 (v2 + bulk dQ), rest = flags
  local v=$1; shift
  if [ $v = 1 ]; then
    FLEXATTN_SM90_BWD_DQ_BULK=1 FLEXATTN_SM90_BWD_V2=1 timeout 20 $F run -B 1 -H 2 -Q 256 -D 128 --dtype bf16 \
      --backend cuda --backward "$@" > "$O/warm_${v}_$RANDOM.log" 2>&1
  else
    timeout 20 $F run -B 1 -H 2 -Q 256 -D 128 --dtype bf16 --backend cuda --backward "$@" \
      > "$O/warm_${v}_$RANDOM.log" 2>&1
  fi
}
for v in 0 1; do short_cases warm $v; done
wait
echo "prewarm done after $(el) s"

# 2. correctness of the v2 path
FLEXATTN_SM90_BWD_DQ_BULK=1 FLEXATTN_SM90_BWD_V2=1 FLEXATTN_JIT_DEBUG=1 timeout 45 $CHECK --quick > "$O/check_v2.log" 2>&1
CHECK_RC=$?
DECL=$(grep -c "backward:" "$O/check_v2.log")
echo "check done after $(el) s"

# 3. speed, same call with and without the switch
timeout 18 $F bench --suite short --backend cuda > "$O/bench_default.log" 2>&1; RC0=$?
FLEXATTN_SM90_BWD_DQ_BULK=1 FLEXATTN_SM90_BWD_V2=1 timeout 18 $F bench --suite short --backend cuda > "$O/bench_v2.log" 2>&1; RC1=$?
echo "bench done after $(el) s"

# 4. table (last)
echo "==== bwd v2: gpu_attention_check --quick rc=$CHECK_RC $(pass_fail "$O/check_v2.log") (sm80 fallbacks: $DECL lines)"
grep "^FAIL" "$O/check_v2.log" | head -3
echo "==== bench --suite short B=4 H=16 S=2048 D=128 (bwd TFLOP/s) rc=$RC0/$RC1"
printf "%-16s %12s %12s %6s\n" case "default bwd" "v2 bwd" "x"
awk 'FNR == 1 { f++ } f == 1 && NF == 8 && $8 ~ /^[0-9]+$/ { d[$1] = $8; order[++n] = $1 }
     f == 2 && NF == 8 && $8 ~ /^[0-9]+$/ { v[$1] = $8 }
     END { for (i = 1; i <= n; i++) { c = order[i]; x = (c in v && d[c] > 0) ? sprintf("%.2f", v[c] / d[c]) : "-"
             printf "%-16s %12s %12s %6s\n", c, d[c], (c in v) ? v[c] : "-", x } }' \
  "$O/bench_default.log" "$O/bench_v2.log"
