#!/usr/bin/env bash
# Session 19 round 5 (issue 6): the turn polls are relaxed loads now, one acquire at the end (bwd_dq_sem_reached; the
# acquire's CCTL.IVALL invalidates the SM's L1, where the block lists live: round 4's early polls lost only with block
# masks). det18.py (GPU time) without and with the early poll, D = 128 and 64; checks with the early poll.
. "$(dirname "$0")/lib.sh"
out_dir s19e; L=$O
deadline 400
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
export FLEXATTN_SM90_BWD_DET_LAUNCH=descending
det_timing det_base 100 DET8_DIMS="128 64"
det_timing det_early 100 DET8_DIMS="128 64" FLEXATTN_SM90_BWD_DQ_EARLY=1
FLEXATTN_SM90_BWD_DQ_EARLY=1 det_checks
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
