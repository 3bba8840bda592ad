#!/bin/sh
# Builds the block-mask lab for the H200 (sm_90a). Run from anywhere; output: bench/lab/block_mask/bm_lab.
set -e
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:-$root/bench/lab/block_mask/bm_lab}
nvcc -std=c++20 -O3 -arch=sm_90a -Xptxas -v -Xptxas -warn-spills -I"$root/kernels" -I"$root/include" -I"$root/src/block_mask" \
  "$root/bench/lab/block_mask/bm_lab.cu" "$root"/src/block_mask/build.cc "$root"/src/block_mask/layout.cc \
  "$root"/src/block_mask/ops.cc "$root"/src/block_mask/render.cc -o "$out" -lpthread
