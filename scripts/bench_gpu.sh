#!/usr/bin/env bash
# On the GPU machine: builds flexattn's Python extension (flexattn._C, a CMake build with
# FLEXATTN_BUILD_PYTHON=ON, loaded through FLEXATTN_NATIVE_DIR as python/flexattn/_native.py expects) and
# runs the side-by-side benchmark, `python3 bench/run.py --suite quick --out $OUT`. Arguments are passed on
# to bench/run.py (e.g. --backward, --suite full). Build logs go to $OUT; the table prints last.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench-out}
mkdir -p "$OUT"
BUILD=${BENCH_BUILD:-build-bench}
PY=$(command -v python3)
GEN=()
# A generator can only be chosen for a new build folder (ignored build outputs are kept between calls).
if [ ! -f "$BUILD/CMakeCache.txt" ] && command -v ninja >/dev/null; then GEN=(-G Ninja); fi
t0=$(date +%s)
echo "bench_gpu: building flexattn._C in $BUILD ($(nproc) jobs)"
cmake -S . -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_BUILD_PYTHON=ON -DFLEXATTN_BUILD_TESTS=OFF \
  -DPython_EXECUTABLE="$PY" >"$OUT/bench-configure.log" 2>&1 || { tail -30 "$OUT/bench-configure.log"; exit 1; }
cmake --build "$BUILD" -j"$(nproc)" --target _C >"$OUT/bench-build.log" 2>&1 \
  || { grep -E -m 30 "error|Error" "$OUT/bench-build.log"; exit 1; }
echo "bench_gpu: built in $(( $(date +%s) - t0 )) s"
export FLEXATTN_NATIVE_DIR="$PWD/$BUILD/bindings" FLEXATTN_REQUIRE_NATIVE=1
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" bench/run.py --suite quick --out "$OUT" "$@"
