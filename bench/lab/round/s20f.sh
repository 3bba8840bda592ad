#!/usr/bin/env bash
# Session 20 round 6: the paired hand-off (FLEXATTN_SM90_BWD_DQ_PAIRS=1: one writer, one turn per 128-row query
# block instead of per 64-row tile). --quick --deterministic with it (bitwise repeats), then det18.py (D = 128 and 64)
# with the switch off and on.
# Apply the patch first (not in the tree: not run on a GPU when written): git apply bench/lab/patches/s20-dq-pairs.patch
. "$(dirname "$0")/lib.sh"
out_dir s20f; L=$O
deadline 330
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
FLEXATTN_SM90_BWD_DQ_PAIRS=1 timeout $(cap 70 10) $CHECK --quick --deterministic > $O/det_pairs.log 2>&1
echo "check --quick --deterministic pairs rc=$? $(pass_fail $O/det_pairs.log) ($(el) s)"; grep ^FAIL $O/det_pairs.log | head -3
det_timing det 200 DET8_DIMS="128 64" DET18_VAR=FLEXATTN_SM90_BWD_DQ_PAIRS DET18_VALUES="0 1"
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
