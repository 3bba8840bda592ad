#!/bin/bash
# Runs on the device machine (via the `run` tool): build the lab with nvcc there, run the correctness
# matrix and the timing table, optionally a compute-sanitizer pass. Full logs go under $OUT.
#   bash bench/lab/sm80/device_run.sh [sanitize]
set -o pipefail
cd "$(dirname "$0")" || exit 1
OUT=${OUT:-/tmp/lab_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s)
if ! make -j16 OUT=build harness > "$OUT/build.log" 2>&1; then
  grep -E "error" "$OUT/build.log" | head -20
  tail -20 "$OUT/build.log"
  exit 1
fi
echo "build: $(( $(date +%s) - t0 )) s; spill warnings: $(grep -c 'spilled' "$OUT/build.log")"
timeout "${TEST_TIMEOUT:-420}" ./harness ${HARNESS_ARGS:-tests time} --log "$OUT/tests.log" > "$OUT/harness.log" 2>&1
rc=$?
cat "$OUT/harness.log"
echo "harness rc=$rc"
if [ "$1" = sanitize ]; then
  timeout "${SAN_TIMEOUT:-120}" compute-sanitizer --tool memcheck --print-limit 20 ./harness tests --tiny \
    --log "$OUT/tiny.log" > "$OUT/memcheck.log" 2>&1
  echo "memcheck rc=$?"
  grep -E "ERROR SUMMARY|Invalid|tests:" "$OUT/memcheck.log" | head -20
fi
exit $rc
