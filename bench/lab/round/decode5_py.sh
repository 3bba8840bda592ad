#!/usr/bin/env bash
# decode5 Python host-cost check (issue 7), <= 120 s on an H200: builds flexattn._C (build-bench, as
# scripts/bench_gpu.sh does; incremental when it exists), then bench/lab/round/decode5_py.py: per case,
# main's _cuda_decode (before) against this tree's (after): host us per paged_attention call, the flushed
# per-call ms / GB/s that bench/run.py --suite decode reports, back-to-back GPU ms, outputs identical.
set -u
cd "$(dirname "$0")/../../.."
O=${OUT:-/tmp}/decode5_py
mkdir -p "$O"
export FLEXATTN_CACHE_DIR=$PWD/build-gpu/kernel-cache
T0=$(date +%s)
BUILD=build-bench
PY=$(command -v python3)
GEN=()
if [ ! -f "$BUILD/CMakeCache.txt" ] && command -v ninja >/dev/null; then GEN=(-G Ninja); fi
timeout 20 cmake -S . -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_BUILD_PYTHON=ON \
  -DFLEXATTN_BUILD_TESTS=OFF -DPython_EXECUTABLE="$PY" > "$O/configure.log" 2>&1 || { tail -5 "$O/configure.log"; exit 1; }
timeout 75 cmake --build "$BUILD" -j"$(nproc)" --target _C > "$O/build.log" 2>&1 \
  || { grep -E -m 10 "error|Error" "$O/build.log"; echo "build failed or timed out at $(( $(date +%s) - T0 )) s"; exit 1; }
echo "built at $(( $(date +%s) - T0 )) s"
export FLEXATTN_NATIVE_DIR="$PWD/$BUILD/bindings" FLEXATTN_REQUIRE_NATIVE=1
export PYTHONPATH="$PWD/python:$PWD/bench${PYTHONPATH:+:$PYTHONPATH}"
t=$(( 118 - ($(date +%s) - T0) ))
[ "$t" -lt 10 ] && { echo "no time left for the probe"; exit 1; }
timeout $t "$PY" bench/lab/round/decode5_py.py > "$O/probe.log" 2>&1; echo "probe rc=$? at $(( $(date +%s) - T0 )) s"
tail -16 "$O/probe.log"
