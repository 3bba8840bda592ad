#!/usr/bin/env bash
# Session 6, py6: paged_attention's per-token host path (binding plans, cached block-mask arguments, cheaper
# argument checks / stream query / views; python/flexattn/_bound_plan.py, paged.py). <= 90 s on the device.
#  1. correctness: tests/python/test_paged_host.py (CPU, native calls stubbed: what reaches them matches the
#     traced path at every call) and tests/python/gpu/test_paged_gpu.py (CUDA path vs CPU path, CUDA-graph
#     replay, and a step loop that rebinds a captured int / float and edits a captured tensor and the mask);
#  2. bench/lab/round/py6_gpu.py: host us per decode step with the caches on / off in one process
#     (FLEXATTN_PAGED_CACHE, paged._CACHE), and each piece of the window step alone;
#  3. bench/lab/round/decode_probe6.py (unchanged copy of the lead's probe) on this tree.
# Prints a summary table last. Predicted: tests all pass; window step host ~45-55 us (s6a: 105.9), no-mask
# ~35-40 us (s6a: 49.6); "_C.cuda_decode alone" is most of what remains.
set -u
cd "$(dirname "$0")/../../.."
O=$OUT/py6; mkdir -p "$O" "$OUT/s6a"
export FLEXATTN_CACHE_DIR=$PWD/build-gpu/kernel-cache
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$(date +%s)
left() { local r=$(( 88 - ($(date +%s) - t0) )); (( r > $1 )) && r=$1; (( r < 1 )) && r=1; echo $r; }
timeout "$(left 38)" python3 -m pytest -q -p no:cacheprovider tests/python/test_paged_host.py \
  tests/python/gpu/test_paged_gpu.py > "$O/tests.log" 2>&1
echo "tests rc=$? $(( $(date +%s) - t0 )) s"
timeout "$(left 22)" python3 bench/lab/round/py6_gpu.py > "$O/py6_gpu.log" 2>&1
echo "py6_gpu rc=$? $(( $(date +%s) - t0 )) s"
timeout "$(left 40)" python3 bench/lab/round/decode_probe6.py > "$O/probe.log" 2>&1
echo "probe rc=$? $(( $(date +%s) - t0 )) s"
mv "$OUT/s6a/decode_cprofile.txt" "$O/" 2>/dev/null; rmdir "$OUT/s6a" 2>/dev/null
echo "==== py6 summary ($(( $(date +%s) - t0 )) s)"
echo "tests (host + gpu paged): $(grep -E '(passed|failed|error)' "$O/tests.log" | tail -1)"
grep -E "^FAILED" "$O/tests.log" | head -1
echo "host us / decode step   s6a-before  cache=0  cache=1   (no sync, median of 5; s6a = parent tree, same probe)"
sed -nE 's/^step (.*[^ ]) +cache=1 +([0-9.]+) +cache=0 +([0-9.]+).*/\1|\2|\3/p' "$O/py6_gpu.log" | awk -F'|' '
  BEGIN { b["B8 S8192"]="49.6"; b["B1 S128k w4096"]="105.9"; b["B8 S8192 p16"]="53.0" }
  { printf "  %-20s %10s %8s %8s\n", $1, b[$1], $3, $2 }'
echo "pieces of the window step (host us each, alone):"
grep -E "^piece" "$O/py6_gpu.log" | grep -vE "empty ws|raw stream" | sed 's/^piece /  /' | head -8
grep -E "^B[0-9]" "$O/probe.log" | grep flexattn | sed 's/^/probe /'
