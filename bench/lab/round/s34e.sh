#!/usr/bin/env bash
# Session 34, s34c plus the v2 consumers' warpgroup sums (bg_wg_store / bg_wg_flush in the stage's dS^T tile between
# two barriers of the warpgroup), against HEAD (s34c.patch regenerated). s34d (H100, the adds behind the GEMM issues):
# default D = 128 learnable 3.9 % slower, deterministic -0.5 %: dropped. Predicted now: D = 128 deterministic -6-8 %,
# default -2-4 %; D = 64 as s34c.
# Was: the buffer-gradient flush of the sm90 backward (issue 6: deterministic learnable relbias +17.3 / +24.7 %
# at D 128 / 64; s34b's ncu: the exact adds' flush was ~210 M of 868 M instructions at D = 64). Two changes against
# HEAD (bench/lab/round/s34c.patch, applied in reverse for the base tree): the first kernel's warpgroup sums
# (bg_wg_store / bg_wg_flush: 127 adds per warpgroup and tile instead of 4 x 79) and a leaner exact add (buf_numel,
# red.global). Checks first, then new / base / base / new of relbias_learnable_full and relbias_full, deterministic.
# Predicted: D = 64 deterministic learnable +24.7 -> ~+12 %, D = 128 +17.3 -> ~+12 %; default learnable D = 64 -3-5 %.
. "$(dirname "$0")/lib.sh"
out_dir s34e; L=$O
deadline ${S34E_DEADLINE:-560}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn gpu_attention_check _C
base_tree bench/lab/round/s34c.patch
learnable_checks FLEXATTN_SM90_BWD_PERSISTENT=1
tree_ab relbias_learnable_full,relbias_full
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
