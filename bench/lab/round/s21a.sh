#!/usr/bin/env bash
# Session 21 round 1 (prepared in session 21, which had no device): FLEXATTN_SM90_SOFTCAP_RCP = k, the softcap path's
# tanh reciprocal on the FMA pipe for k eighths of the entries (common/poly_rcp.cuh). Checked first with k = 8
# (every softcap case of gpu_attention_check, then `run --check` at the odd lengths), then the forward swept over
# k = 0 2 4 6 8 on softcap + causal (D = 64 and 128, B=2 H=16 S=8192; causal's source has no define). (No POLY_EXP2
# sweep: its exp2 costs 12 FMA-pipe instructions where the reciprocal costs 7, so it can only help once k = 8 leaves
# the MUFU still the limit, which neither model predicts.)
# Two models, opposite predictions: by MUFU cycles (3 ops of 8 cycles per 32 entries) k = 6 takes the score phase
# from 16 to ~10.5 cycles and softcap + causal D=128 from 421 to ~460-480 TFLOP/s; by session 7's profile (the
# softmax warp's time follows its instruction count, MUFU waits 40 % of its stalls) each moved eighth adds 0.75
# instructions to 8.5 per entry and k = 8 loses ~20 %. Expected: a gain at small k if any, a loss at 8.
. "$(dirname "$0")/lib.sh"
out_dir s21a; L=$O
deadline 420
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
FLEXATTN_SM90_SOFTCAP_RCP=8 timeout $(cap 90 10) $CHECK --only softcap > $O/check_rcp8.log 2>&1
echo "check --only softcap rcp8 rc=$? $(pass_fail $O/check_rcp8.log) ($(el) s)"; grep ^FAIL $O/check_rcp8.log | head -3
export FLEXATTN_SM90_SOFTCAP_RCP=8
for q in 65 127 129 1000 4097; do run_check --dtype bf16 -Q $q -D 128 --score softcap:30; done  # L > 64: not the decode family
for q in 129 1000; do run_check --dtype bf16 -Q $q -D 64 --mask causal --score softcap:30; done
run_check --dtype f16 -Q 777 -D 128 --mask causal --score softcap:30
run_check --dtype bf16 -Q 300 --kv 1001 -D 64 --hkv 2 --score softcap:20
unset FLEXATTN_SM90_SOFTCAP_RCP
run_check_summary
fwd_sweep FLEXATTN_SM90_SOFTCAP_RCP "0 2 4 6 8" softcap_causal
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
