#!/usr/bin/env bash
# Session 20 round 3: the late q_free (FLEXATTN_SM90_LATE_Q_FREE=1: the persistent forward's thread 0 waits for its O
# store's read after the next tile's first Q K^T instead of in the epilogue), checked with --quick and timed A/B/B/A
# on the forward (flexattn only, B=2 H=16 S=8192).
. "$(dirname "$0")/lib.sh"
out_dir s20c; L=$O
deadline 560
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
FLEXATTN_SM90_LATE_Q_FREE=1 timeout $(cap 70 5) $CHECK --quick > $O/check_late.log 2>&1
echo "check --quick late rc=$? $(pass_fail $O/check_late.log) ($(el) s)"; grep ^FAIL $O/check_late.log | head -3
fwd_ab FLEXATTN_SM90_LATE_Q_FREE
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
