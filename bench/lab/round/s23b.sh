#!/usr/bin/env bash
# Session 23 round 2 (after s23a on a warm machine): (1) exact softcap with the row sums on the tensor cores
# (FLEXATTN_SM90_SUM_MMA=1) and the tanh's reciprocal on the FMA pipe (FLEXATTN_SM90_SOFTCAP_RCP=8; never run on a GPU
# before): its check, then the forward 0 / 8 / 8 / 0 on softcap + causal. Exact softcap holds the MUFU for 3 ops per
# entry (3072 MUFU cycles against 2048 tensor-core cycles per 128 x 128 tile at D=128: 65 % of dense, where it is);
# RCP=8 takes it to 2 ops, SUM_MMA takes the FADD off the issue slots the polynomial reciprocal needs.
# Predicted: softcap_causal D=128 420 -> 460-500 TFLOP/s. (2) The persistent backward at D=128 again (s21d.sh, last
# measured in session 6): its check, then the backward 0 / 1 / 1 / 0 on full, causal, sliding and document.
. "$(dirname "$0")/lib.sh"
out_dir s23b; L=$O
deadline 430
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
export FLEXATTN_SM90_SUM_MMA=1
FLEXATTN_SM90_SOFTCAP_RCP=8 timeout $(cap 80 10) $CHECK --only softcap:30 > $O/check_rcp8.log 2>&1
echo "check --only softcap:30 rcp8+summma rc=$? $(pass_fail $O/check_rcp8.log) ($(el) s)"; grep ^FAIL $O/check_rcp8.log | head -3
fwd_sweep FLEXATTN_SM90_SOFTCAP_RCP "0 8" softcap_causal
unset FLEXATTN_SM90_SUM_MMA
FLEXATTN_SM90_BWD_PERSISTENT=1 quick_check 90 --only causal --only document --only sliding --only full
bwd_sweep FLEXATTN_SM90_BWD_PERSISTENT "0 1" full,causal,sliding1024,document
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
