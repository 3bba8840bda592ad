#!/usr/bin/env bash
# Session 16 round 2: the builder as committed (compile-time want, 2 kv columns per step, compact alone):
# bm_lab check + gpu_block_mask_check. Then FLEXATTN_SM90_POLY_EXP2=1 at D=64 over the mask-only cases (session 7:
# dense 407 -> 424-432, the rest +-2 %; record since: dense 426 against the 450 target), three alternating
# repeats, B=2 H=16 S=8192 forward (flexattn run; TFLOP/s over causal-equivalent entries: read the ratios).
. "$(dirname "$0")/lib.sh"
out_dir s16b; L=$O
deadline 330
nvcc -std=c++20 -O3 -arch=sm_90a -Ikernels -Iinclude -Isrc/block_mask bench/lab/block_mask/bm_lab.cu src/block_mask/build.cc \
  src/block_mask/layout.cc src/block_mask/ops.cc src/block_mask/render.cc -o /tmp/bm -lpthread > $O/nvcc_bm.log 2>&1 &
build_gpu $O gpu_block_mask_check flexattn
wait
timeout $(cap 90 5) /tmp/bm check > $O/check_bm.log 2>&1; echo "bm_lab check rc=$? $(grep 'check:' $O/check_bm.log)"
timeout $(cap 60 5) /tmp/bm time > $O/time_bm.log 2>&1; grep -o '^[a-z][^B]*B=.*blk=[0-9x]*\|total [0-9.]* ms' $O/time_bm.log | paste -sd' ' | sed 's/ B=1 H=1 L=S=/ /g'
timeout $(cap 90 5) build-gpu/tests/gpu/block_mask_gpu/gpu_block_mask_check > $O/gpu_bm.log 2>&1; echo "gpu_block_mask_check rc=$? $(tail -1 $O/gpu_bm.log)"
CASES="full causal sliding document prefixlm"
flags() { case $1 in full) ;; causal) echo --mask causal ;; sliding) echo --mask sliding_window:1023 ;;
  document) echo --mask document:8 ;; prefixlm) echo --mask prefix_lm:2048 ;; esac; }
runit() {  # k case B H S log
  local k=$1 m=$2; shift 2
  FLEXATTN_SM90_POLY_EXP2=$k timeout 30 $F run -B $1 -H $2 -Q $3 -D 64 --dtype bf16 --backend cuda $(flags $m) > $4 2>&1
}
for m in $CASES; do for k in 0 1; do runit $k $m 1 2 1024 $O/warm_${m}_$k.log & done; done
wait; echo "prewarm $(el) s"
for rep in 1 2 3; do for m in $CASES; do for k in 0 1; do runit $k $m 2 16 8192 $O/big_${m}_${k}_$rep.log; done; done; done
echo "runs $(el) s"
for m in $CASES; do for k in 0 1; do
  echo "$m k=$k: $(for rep in 1 2 3; do ms_of $O/big_${m}_${k}_$rep.log forward; done | paste -sd' ') ms"
done; done
echo "total $(el) s"
