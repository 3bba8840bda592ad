#!/usr/bin/env bash
# Helper "fwd5" (issue 5, sm90 forward): GPU check of four opt-in switches (docs/env_vars.md):
#   FLEXATTN_SM90_AFFINE=1  ALiBi-shaped score_mods (codegen kRelAffine) evaluate the bias per tile as an
#                           affine function of the column: 2 FFMA per entry instead of FMUL+IADD3+I2FP+FFMA
#                           (fast path 607 -> 449 SASS instructions per kv tile, alibi D=128);
#   FLEXATTN_SM90_UDESC=1   wgmma descriptors in uniform registers (redux.sync of the stage address):
#                           no R2UR per wgmma (D=64 dense: 237 -> 173 R2UR, issue region 147 -> 129);
#   FLEXATTN_SM90_ILP=1     softmax row max / row sum as 4 independent chains (D=64 fast path dependency
#                           depth 166 -> 84 cycles in a 4-cycle ALU / 18-cycle MUFU model; the profile's
#                           softmax is 41 % stall_wait with 2 consumer warps per scheduler);
#   FLEXATTN_SM90_LAZY=1    the exponent's reference max moves only when the row max passes it by > 8
#                           (log2): P <= 256, the O rescale (Dv/2 FMUL per tile) skipped when a warp kept it.
# <= 100 s: every step under `timeout`, capped by what is left of a 96 s deadline (a step with no time
# left is skipped and shows "-"). "new" = all four on (AFFINE changes only ALiBi-shaped mods).
#  1. prewarm (parallel tiny runs): the short suites' forward sets, default and new, and backward sets;
#  2. gpu_attention_check --quick with all four on (it compares out, lse and max_score);
#  3. flexattn run --check (CPU reference) of alibi+causal at S=1024 with the switches (|bias| to ~500);
#  4. S=8192 forward (flexattn run): alibi+causal D=128 and dense D=128 default vs new, dense D=64
#     default / UDESC+ILP / LAZY / new, relbias D=128 default vs new + FLEXATTN_SM90_NARROW=0 (the wide tile);
#     TFLOP/s = 4*D*attended / time;
#  5. bench --suite short and short64, default vs new;
#  6. the table LAST.
# Run from the repo root on the device; $OUT writable; build-gpu/ configured and built.
. "$(dirname "$0")/lib.sh"
out_dir fwd5
deadline 97
both() { FLEXATTN_SM90_AFFINE=1 FLEXATTN_SM90_UDESC=1 FLEXATTN_SM90_ILP=1 FLEXATTN_SM90_LAZY=1 "$@"; }
udilp() { FLEXATTN_SM90_UDESC=1 FLEXATTN_SM90_ILP=1 "$@"; }
lazy() { FLEXATTN_SM90_LAZY=1 "$@"; }
wide() { FLEXATTN_SM90_NARROW=0 both "$@"; }
plain() { "$@"; }

run_t() {  # how seconds log cmd... (at most `seconds`, and what is left; skipped when no time is left)
  local how=$1 t; t=$(cap $2); local log=$3; shift 3
  if [ "$t" -gt 0 ]; then $how timeout $t "$@" > "$log" 2>&1; else echo "skipped: no time left" > "$log"; return 124; fi
}

# 1. prewarm: kernel sets do not depend on B/H/S except the document divisor (S/8 = 256 at S=2048).
warm() {  # $1 = plain|both, $2 = D, rest = mod flags; plain also builds the backward sets (bench runs them)
  local how=$1 d=$2 bw=; shift 2
  [ $how = plain ] && bw=--backward
  $how timeout 30 $F run -B 1 -H 2 -Q 256 -D $d --dtype bf16 --backend cuda $bw "$@" > "$O/warm_${how}_$RANDOM.log" 2>&1
}
for d in 128 64; do
  for how in plain both; do short_cases warm $how $d; done
done
warm udilp 64 &
warm lazy 64 &
warm wide 128 --score relbias &
wait
echo "prewarm done after $(el) s"

# 2. correctness with both switches
run_t both 34 "$O/check.log" $CHECK --quick
CHECK_RC=$?
echo "check done after $(el) s"

# 3. ALiBi against the CPU reference where the bias reaches ~-500 (slope 1/2 x 1023)
run_t both 8 "$O/check_alibi_1024.log" $F run -B 1 -H 2 -Q 1024 -D 128 --dtype bf16 --backend cuda --mask causal \
  --score alibi --check
ALIBI_RC=$?

# 4. S=8192 forward
big() {  # how tag D flags...
  local how=$1 tag=$2 d=$3; shift 3
  run_t $how 5 "$O/big_$tag.log" $F run -B 2 -H 16 -Q 8192 -D $d --dtype bf16 --backend cuda "$@"
}
for how in plain both; do
  big $how alibi_$how 128 --mask causal --score alibi
  big $how d64_$how 64
done
big udilp d64_udilp 64
big lazy d64_lazy 64
big plain d128_plain 128
big both d128_both 128
big plain relbias_plain 128 --score relbias
big wide relbias_wide 128 --score relbias
echo "runs done after $(el) s"

# 5. bench suites, default vs new
run_t plain 8 "$O/short_default.log" $F bench --suite short --backend cuda
run_t both 8 "$O/short_new.log" $F bench --suite short --backend cuda
run_t plain 8 "$O/short64_default.log" $F bench --suite short64 --backend cuda
run_t both 8 "$O/short64_new.log" $F bench --suite short64 --backend cuda
echo "bench done after $(el) s"

# 6. table (last)
tf() {  # log D causal(0/1) -> TFLOP/s at B=2 H=16 S=8192 (4 D flops per attended entry)
  tflops $(( 4 * $2 * 2 * 16 * ($3 ? 8192 * 8193 / 2 : 8192 * 8192) )) "$(ms_of "$1" forward)"
}
echo "==== fwd5 (new = FLEXATTN_SM90_AFFINE=1 UDESC=1 ILP=1 LAZY=1): check --quick rc=$CHECK_RC $(pass_fail "$O/check.log");" \
     "alibi S=1024 --check rc=$ALIBI_RC $(grep -o 'check: .*' "$O/check_alibi_1024.log")"
grep "^FAIL" "$O/check.log" | head -2
echo "S=8192 B=2 H=16 fwd TFLOP/s default -> new: alibi+causal D128 $(tf $O/big_alibi_plain.log 128 1) -> $(tf $O/big_alibi_both.log 128 1)," \
     "dense D64 $(tf $O/big_d64_plain.log 64 0) -> $(tf $O/big_d64_both.log 64 0) (UDESC+ILP $(tf $O/big_d64_udilp.log 64 0), LAZY $(tf $O/big_d64_lazy.log 64 0)), dense D128 $(tf $O/big_d128_plain.log 128 0) -> $(tf $O/big_d128_both.log 128 0)"
echo "S=8192 relbias D128 (wide = new + FLEXATTN_SM90_NARROW=0): $(tf $O/big_relbias_plain.log 128 0) -> $(tf $O/big_relbias_wide.log 128 0)"
printf "%-16s %10s %10s %10s %10s\n" "fwd TFLOP/s" "D128 def" "D128 new" "D64 def" "D64 new"
awk '{ for (k = 1; k < ARGC; k++) if (FILENAME == ARGV[k]) f = k } NF == 8 && $8 ~ /^[0-9]+$/ { if (!($1 in seen)) { seen[$1] = 1; o[++n] = $1 } v[$1, f] = $6 }
     END { for (i = 1; i <= n; i++) { c = o[i]; printf "%-16s", c
             for (k = 1; k <= 4; k++) printf " %10s", ((c, k) in v) ? v[c, k] : "-"; printf "\n" } }' \
  "$O/short_default.log" "$O/short_new.log" "$O/short64_default.log" "$O/short64_new.log"
