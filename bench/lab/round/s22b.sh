#!/usr/bin/env bash
# Session 22 round 6 (the device time left, ~300 s): s21a.sh trimmed -- FLEXATTN_SM90_SOFTCAP_RCP at k = 8 checked on
# every softcap case of gpu_attention_check, then the forward at k = 0 / 8 / 8 / 0 on softcap + causal.
. "$(dirname "$0")/lib.sh"
out_dir s22b; L=$O
deadline 280
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
FLEXATTN_SM90_SOFTCAP_RCP=8 timeout $(cap 80 10) $CHECK --only softcap:30 > $O/check_rcp8.log 2>&1
echo "check --only softcap:30 rcp8 rc=$? $(pass_fail $O/check_rcp8.log) ($(el) s)"; grep ^FAIL $O/check_rcp8.log | head -3
fwd_sweep FLEXATTN_SM90_SOFTCAP_RCP "0 8" softcap_causal
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
