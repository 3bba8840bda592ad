#!/usr/bin/env bash
# Prepared in session 28 (no GPU left): the persistent backward with its work tiles in L2-sized head groups (the
# non-persistent kernel's launch order; before, one group of every pair: B=2 H=16 S=8192 D=128 put every head's Q, dO
# and dQ accumulator, 256 MiB, in flight against a 50 MiB L2). s28a (H100) measured the old order at 0.80 of the
# default's speed on dense D=128, 0.89 sliding, 0.92 causal, 0.97 document. Correctness first (--quick with it on),
# then default vs persistent (grouped) A/B/B/A, then persistent with HEAD_GROUPS 0 (old order) vs auto (grouped).
# Predicted: grouped persistent within 2 % of the default on full / causal (the L2 loss gone) and +3-8 % on sliding /
# document (the epilogue / next prologue overlap the kernel exists for). If so: default on for short-walk calls.
. "$(dirname "$0")/lib.sh"
out_dir s29b; L=$O
deadline ${S29B_DEADLINE:-560}
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
FLEXATTN_SM90_BWD_PERSISTENT=1 quick_check 100 --only causal --only document --only sliding --only full
bwd_sweep FLEXATTN_SM90_BWD_PERSISTENT "0 1" full,causal,sliding1024,document
export FLEXATTN_SM90_BWD_PERSISTENT=1
bwd_sweep FLEXATTN_SM90_BWD_HEAD_GROUPS "0 auto" full,sliding1024,document
unset FLEXATTN_SM90_BWD_PERSISTENT
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
