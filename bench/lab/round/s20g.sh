#!/usr/bin/env bash
# Session 20 round 6 (s20f.sh trimmed to the device time left): the paired hand-off (FLEXATTN_SM90_BWD_DQ_PAIRS) timed
# with det18.py at D = 128 on full and causal, the switch off and on (bitwise repeats within each mode).
# Apply the patch first (not in the tree: not run on a GPU when written): git apply bench/lab/patches/s20-dq-pairs.patch
. "$(dirname "$0")/lib.sh"
out_dir s20g; L=$O
deadline 200
BUILD_PY=ON build_gpu $O flexattn _C
det_timing det 140 DET8_DIMS="128" DET18_CASES="full causal" DET18_VAR=FLEXATTN_SM90_BWD_DQ_PAIRS DET18_VALUES="0 1"
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
