#!/usr/bin/env bash
# Session 15 round 5: the block-mask builder's scan with 2 kv columns per step instead of 4 (FLEXATTN_BM_UNROLL):
# locally its NVRTC compile is ~20 % shorter (document mask: nvcc cicc + ptxas 491 -> 398 ms). Does the scan slow
# down? `bm_lab check` with 2, `bm_lab time` with 4 and 2 (S up to 131072), then the cold compile of the document and
# sliding masks through the library built with 2 (record: document 2.05 s, builder 0.47-0.54 of it).
. "$(dirname "$0")/lib.sh"
out_dir s15f; L=$O
deadline 400
lab() {  # lab OUT UNROLL
  nvcc -std=c++20 -O3 -arch=sm_90a -DFLEXATTN_BM_UNROLL=$2 -Ikernels -Iinclude -Isrc/block_mask bench/lab/block_mask/bm_lab.cu \
    src/block_mask/build.cc src/block_mask/layout.cc src/block_mask/ops.cc src/block_mask/render.cc -o $1 -lpthread > $O/nvcc_$2.log 2>&1 \
    || { tail -5 $O/nvcc_$2.log; exit 1; }
}
lab /tmp/bm4 4 & lab /tmp/bm2 2 & wait
echo "lab built $(el) s"
timeout $(cap 90 5) /tmp/bm2 check > $O/check2.log 2>&1; echo "unroll 2: rc=$? $(grep 'check:' $O/check2.log)"
for r in 1 2; do
  timeout $(cap 60 5) /tmp/bm4 time > $O/time4_$r.log 2>&1; timeout $(cap 60 5) /tmp/bm2 time > $O/time2_$r.log 2>&1
done
for r in 1 2; do for u in 4 2; do
  echo "unroll $u run $r: $(grep -o '^[a-z][^B]*B=.*blk=[0-9x]*\|total [0-9.]* ms' $O/time${u}_$r.log | paste -sd' ' | sed 's/ B=1 H=1 L=S=/ /g')"
done; done
sed -i 's/^#define FLEXATTN_BM_UNROLL 4$/#define FLEXATTN_BM_UNROLL 2/' kernels/common/block_mask_build.cuh
grep -n "define FLEXATTN_BM_UNROLL" kernels/common/block_mask_build.cuh
BUILD_PY=ON build_gpu $O _C
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python:$PWD/bench
probe() {
  FLEXATTN_CACHE_DIR=$(mktemp -d /tmp/cp.XXXX) timeout $(cap 60 5) python3 bench/lab/s15/compile_probe.py "$@" | tee -a $O/probe.log
}
for r in 1 2; do probe document 128 alone; probe sliding1024 128 alone; done
echo "total $(el) s"
