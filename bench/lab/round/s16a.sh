#!/usr/bin/env bash
# Session 16 round 1: the block-mask builder split in two NVRTC programs (compact alone, mask-independent, compiled
# once beside the first classify) and one scan copy with a runtime `want` (locally: document builder NVRTC
# 430 -> 170 ms, causal 320 -> 110, sliding 363 -> 140). Correctness: bm_lab check (new header), gpu_block_mask_check
# (JIT path). Scan speed: bm_lab time, old header (compile-time want) unroll 4 / 2 against the new one unroll 4 / 2.
# Then the cold builder and forward compiles through the library (record: document builder 0.47 s of 2.05).
. "$(dirname "$0")/lib.sh"
out_dir s16a; L=$O
deadline 420
mkdir -p /tmp/old/common && git show HEAD:kernels/common/block_mask_build.cuh > /tmp/old/common/block_mask_build.cuh
lab() {  # lab OUT UNROLL INCLUDE_FIRST
  nvcc -std=c++20 -O3 -arch=sm_90a -DFLEXATTN_BM_UNROLL=$2 -I$3 -Ikernels -Iinclude -Isrc/block_mask bench/lab/block_mask/bm_lab.cu \
    src/block_mask/build.cc src/block_mask/layout.cc src/block_mask/ops.cc src/block_mask/render.cc -o $1 -lpthread > $O/nvcc_$(basename $1).log 2>&1 \
    || { tail -5 $O/nvcc_$(basename $1).log; exit 1; }
}
lab /tmp/new4 4 kernels & lab /tmp/new2 2 kernels & lab /tmp/old4 4 /tmp/old & lab /tmp/old2 2 /tmp/old &
BUILD_PY=ON build_gpu $O gpu_block_mask_check flexattn _C
wait
echo "lab built $(el) s"
timeout $(cap 90 5) /tmp/new4 check > $O/check_new4.log 2>&1; echo "new4 check rc=$? $(grep 'check:' $O/check_new4.log)"
timeout $(cap 90 5) build-gpu/tests/gpu/block_mask_gpu/gpu_block_mask_check > $O/gpu_bm.log 2>&1; echo "gpu_block_mask_check rc=$? $(tail -2 $O/gpu_bm.log | head -1)"
for r in 1 2; do for v in old4 new4 old2 new2; do timeout $(cap 60 5) /tmp/$v time > $O/time_${v}_$r.log 2>&1; done; done
for r in 1 2; do for v in old4 new4 old2 new2; do
  echo "$v run $r: $(grep -o '^[a-z][^B]*B=.*blk=[0-9x]*\|total [0-9.]* ms' $O/time_${v}_$r.log | paste -sd' ' | sed 's/ B=1 H=1 L=S=/ /g')"
done; done
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python:$PWD/bench
probe() {  # probe CASE D MODE
  FLEXATTN_CACHE_DIR=$(mktemp -d /tmp/cp.XXXX) FLEXATTN_JIT_DEBUG=1 timeout $(cap 60 5) \
    python3 bench/lab/s15/compile_probe.py "$@" 2>> $O/probe_jit.log | tee -a $O/probe.log
}
for r in 1 2; do for c in document sliding1024 causal; do probe $c 128 builder; probe $c 128 alone; done; done
grep "block_mask" $O/probe_jit.log | head -20
echo "total $(el) s"
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
