#!/usr/bin/env bash
# Session 20 round 2: the two-dQ-buffer v2 (committed 8a67f5f) through the whole --deterministic set and --quick; then
# the deferred forward epilogue (FLEXATTN_SM90_DEFER_EPILOGUE=1: a tile's epilogue after the next tile's first Q K^T,
# persistent kernel, D <= 128) checked with --quick and timed A/B/B/A on the forward (flexattn only, B=2 H=16 S=8192).
. "$(dirname "$0")/lib.sh"
out_dir s20b; L=$O
deadline 560
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
det_checks all
quick_check 60
FLEXATTN_SM90_DEFER_EPILOGUE=1 timeout $(cap 70 5) $CHECK --quick > $O/check_defer.log 2>&1
echo "check --quick defer rc=$? $(pass_fail $O/check_defer.log) ($(el) s)"; grep ^FAIL $O/check_defer.log | head -3
fwd_ab FLEXATTN_SM90_DEFER_EPILOGUE
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
