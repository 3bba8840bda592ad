#!/usr/bin/env bash
# Session 19 round 3 (issue 6): the dQ writer polls its next tile's turn before dq_full (FLEXATTN_SM90_BWD_DQ_EARLY=1,
# a compile-time define: two processes). Checks with it, then det18.py (GPU time) without and with it, launch order
# descending in both.
. "$(dirname "$0")/lib.sh"
out_dir s19c; L=$O
deadline 400
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
export FLEXATTN_SM90_BWD_DET_LAUNCH=descending
FLEXATTN_SM90_BWD_DQ_EARLY=1 det_checks
det_timing det_base 110 DET8_DIMS="128 64"
det_timing det_early 110 DET8_DIMS="128 64" FLEXATTN_SM90_BWD_DQ_EARLY=1
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
