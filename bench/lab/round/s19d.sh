#!/usr/bin/env bash
# Session 19 round 4 (issue 6): round 3's early turn polls lost at D = 128 (causal +21 -> +53 %) and won at D = 64
# (+16 -> +10 %). Suspect: the poll's traffic on the semaphore lines while other CTAs release into them. D = 128 only:
# without the early poll, with it, and with a nanosleep of 128 / 512 ns between polls.
. "$(dirname "$0")/lib.sh"
out_dir s19d; L=$O
deadline 400
BUILD_PY=ON build_gpu $O flexattn _C
export FLEXATTN_SM90_BWD_DET_LAUNCH=descending
det_timing det_base 80 DET8_DIMS="128"
det_timing det_early 80 DET8_DIMS="128" FLEXATTN_SM90_BWD_DQ_EARLY=1
det_timing det_early128 80 DET8_DIMS="128" FLEXATTN_SM90_BWD_DQ_EARLY=1 FLEXATTN_SM90_BWD_DQ_EARLY_SLEEP=128
det_timing det_early512 80 DET8_DIMS="128" FLEXATTN_SM90_BWD_DQ_EARLY=1 FLEXATTN_SM90_BWD_DQ_EARLY_SLEEP=512
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
