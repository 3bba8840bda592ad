#!/usr/bin/env bash
# Builds compile_time.cc against the local build's static libraries (run `make` first).
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
b=$root/build/src
libs=$(find "$b" -name 'libflexattn_*.a' ! -name '*nccl*' | tr '\n' ' ')
g++ -std=c++20 -O1 -I"$root/include" -I"$root/src" -I"$root/tests" "$root/bench/lab/s22/compile_time.cc" \
  -Wl,--start-group $libs -Wl,--end-group -ldl -lpthread -o /tmp/s22_compile_time
echo /tmp/s22_compile_time
