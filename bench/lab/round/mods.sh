#!/usr/bin/env bash
# GPU check of wip/mods (issue 5: score_mod cost in the generated code; budget 100 s). What changed is the
# generated functor of every mod with a gather, a float division or a tanh (default path):
#  - x / d with a uniform d (literal, scalar, expression of those) -> x * fa_rcp(d) (softcap, alibi, t5);
#  - tanh branch-free from ex2.approx / rcp.approx (wip/fast-div-tanh), u * tanh(x * k) fused (softcap);
#  - i32 gather indices clamped in 32 bits, the buffer row address hoisted (relbias, t5, alibi_slopes,
#    document).
# 1. gpu_attention_check --quick (every corpus mod, fwd + bwd, sm90 and the families it falls back to; it has
#    no filter, so all of it: ~40 s); 2. flexattn bench --suite short (B=4 H=16 S=2048 D=128), fwd + bwd;
# 3. with the time left, relbias on the wide sm90 tile (FLEXATTN_SM90_NARROW=0, opt-in, docs/env_vars.md).
# Before numbers: the lead's earlier run of main. Logs in $OUT/mods/.
. "$(dirname "$0")/lib.sh"
out_dir mods
L=$O
SECONDS=0
timeout 52 $CHECK --quick > "$L/check_quick.log" 2>&1
crc=$?
timeout 34 $F bench --suite short --backend cuda > "$L/bench_short.log" 2>&1
brc=$?
# 3. If time is left: relbias forward on the wide tile (FLEXATTN_SM90_NARROW=0, opt-in) at the short shape.
left=$((97 - SECONDS))
wide="skipped (no time left)"
if [ $left -gt 6 ]; then
  FLEXATTN_SM90_NARROW=0 timeout $left $F run -B 4 -H 16 -Q 2048 -D 128 --dtype bf16 --backend cuda --score relbias \
    > "$L/relbias_wide.log" 2>&1
  ms=$(ms_of "$L/relbias_wide.log" forward)
  # 4 D flops per entry, B H S^2 entries (as bench --suite short counts them)
  [ -n "$ms" ] && wide="$ms ms = $(tflops $(( 4 * 128 * 4 * 16 * 2048 * 2048 )) $ms) TFLOP/s"
fi
echo "==== mods: correctness (gpu_attention_check --quick rc=$crc)"
echo "PASS $(grep -c '^PASS' "$L/check_quick.log")  FAIL $(grep -c '^FAIL' "$L/check_quick.log")  ($(grep -E '^[0-9]+ cases' "$L/check_quick.log"))"
grep '^FAIL' "$L/check_quick.log" | head -4
# worst errors (out, lse, grads) of the mods this branch changes most, over their cases
awk '$1 ~ /softcap|relbias|alibi|t5/ { for (j = 5; j <= NF; ++j) if ($j ~ /^(PASS|FAIL)/) break;
     if (j > NF) next; m = $1; seen[m] = 1
     for (i = 1; i <= 3; ++i) if ($(j - 4 + i) + 0 > w[m, i]) w[m, i] = $(j - 4 + i) + 0 }
     END { for (m in seen) printf "  %-32s out %.1e lse %.1e grads %.1e\n", m, w[m, 1], w[m, 2], w[m, 3] }' \
    "$L/check_quick.log" | sort | head -6
echo "==== mods: bench --suite short (rc=$brc), after; before = lead's earlier main run"
grep -E '^case' "$L/bench_short.log"
grep -E '^(causal|document|sliding|prefix)' "$L/bench_short.log"
grep -E '^(full|alibi_causal|softcap_causal|relbias_full) ' "$L/bench_short.log"
echo "relbias_full fwd, FLEXATTN_SM90_NARROW=0 (wide tile): $wide"
