#!/usr/bin/env bash
# Issue 3's "done when": `flexattn run --backend cuda --check --backward` agrees with the CPU reference for every
# library mod (forward, backward, buffer gradients) at an odd length, GQA and D = 64 / 128, on the defaults.
# A step of `make gpu-test` (scripts/gpu_test.sh); logs under $1 (default build-gpu/logs/library).
set -u
cd "$(dirname "$0")/.."
LOGDIR=${1:-build-gpu/logs}/library
F=build-gpu/tools/flexattn
mkdir -p "$LOGDIR"
pass=0; fail=0
for m in "--mask full" "--mask causal" "--mask sliding_window:100" "--mask prefix_lm:64" "--mask document:3" \
         "--mask document:3:i64" "--mask chunked:64" "--mask dilated:3" "--score softcap:30 --mask causal" \
         "--score alibi --mask causal" "--score alibi_slopes" "--score relbias" "--score t5" "--score t5:16:64 --mask causal"; do
  for d in 64 128; do
    name=$(echo "$m d$d" | tr -c 'a-z0-9\n' '_')
    if timeout 60 $F run -B 2 -H 4 --hkv 2 -Q 257 --kv 300 -D $d --dtype bf16 $m --backend cuda --check --backward \
         > "$LOGDIR/$name.log" 2>&1; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL $m D=$d: $(grep -E 'FAIL|rror' "$LOGDIR/$name.log" | head -3 | tr '\n' ' ')"; fi
  done
done
echo "library mods --check --backward: $pass passed, $fail failed"
[ $fail -eq 0 ]
