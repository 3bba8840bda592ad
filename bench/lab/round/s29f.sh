#!/usr/bin/env bash
# Session 29 (issue 6; the D=64 backward at 0.72x cuDNN): s29d's ncu of the dense D=64 backward (H100) showed the v3
# dQ buffers' 8-byte stores and loads at 2 wavefronts per half-warp instead of 1 (100 M excessive of 610 M shared
# wavefronts; the same stores at D=128): rows g and g ^ 1 of a half-warp put a column block on the same banks under
# the 128B swizzle. FLEXATTN_SM90_BWD_DQ_SWAP=1 (opt-in) stores in a lane-dependent block order (odd g take block
# i ^ 2), conflict-free, same layout. Locally: no spills (full, causal, document, alibi, relbias, softcap, t5; D 64/128).
# 1. gpu_attention_check --quick with it on (every backward form at D 64 / 128), memcheck --quick.
# 2. bwd_sweep off / on (B=2 H=16 S=8192, full, causal, sliding, document, D 64 and 128).
# Predicted: correct; backward -2 to -6 % ms at D=64, less at D=128.
. "$(dirname "$0")/lib.sh"
out_dir s29f; L=$O
deadline ${S29F_DEADLINE:-270}
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
export FLEXATTN_SM90_BWD_DQ_SWAP=1
quick_check 60
timeout $(cap 70 5) compute-sanitizer --tool memcheck --error-exitcode 3 $CHECK --quick --only full --only causal \
  --only document > $O/memcheck.log 2>&1
echo "memcheck --quick rc=$? $(pass_fail $O/memcheck.log) ($(el) s)"; grep -m3 "Invalid\|ERROR SUMMARY" $O/memcheck.log
unset FLEXATTN_SM90_BWD_DQ_SWAP
bwd_sweep FLEXATTN_SM90_BWD_DQ_SWAP "0 1" full,causal,sliding1024,document
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
