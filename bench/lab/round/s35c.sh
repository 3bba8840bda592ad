#!/usr/bin/env bash
# Session 35, call 1 of 2 (machines were scarce: ~6 min of the budget went to starts that found none, so s35a and
# s35b run as one call, s35b trimmed: no ncu). FLEXATTN_SM90_ROW_ORDER=auto (the default since f46a25f, never run on
# a GPU): --quick on the masks it touches, the Python order tests, `run --check` at odd lengths, then the forward
# A/B/B/A (0, auto) on document and prefix-LM. Then FLEXATTN_SM90_BWD_CTA_ORDER=1 (opt-in, c7f297b): --quick on
# document / causal / sliding, and the backward A/B/B/A (0, 1) on document and causal at D=128. Predictions: s35a.sh
# and s35b.sh. If the row order fails, the record (call 2) runs with FLEXATTN_SM90_ROW_ORDER=0: this call leaves
# build-gpu/row_order_verdict (ignored; the device keeps build-gpu between calls).
. "$(dirname "$0")/lib.sh"
out_dir s35c; L=$O
deadline ${S35C_DEADLINE:-560}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
bad=0
timeout $(cap 100 5) $CHECK --quick --only document --only causal --only prefix --only sliding > $O/check.log 2>&1
rc=$?; echo "check (row order auto) rc=$rc $(pass_fail $O/check.log) ($(el) s)"; grep ^FAIL $O/check.log | head -3
[ $rc -ne 0 ] && bad=1
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python
timeout $(cap 80 10) python3 -m pytest -q -p no:cacheprovider tests/python/gpu/test_gpu_vs_torch.py \
  -k "row_order or document" > $O/pytest.log 2>&1; rc=$?; echo "pytest rc=$rc ($(el) s)"; tail -1 $O/pytest.log
[ $rc -ne 0 ] && { bad=1; grep -E "^(FAILED|ERROR)" $O/pytest.log | head -5; }
for a in "-Q 1000 --mask document:3" "-Q 4097 --mask document:5 -D 64" "-Q 2048 --mask causal" \
         "-Q 1500 --mask-expr q_idx//300==kv_idx//300&&q_idx>=kv_idx --backward"; do
  run_check --dtype bf16 $a
done
run_check_summary
[ $RUN_BAD -ne 0 ] && bad=1
echo $bad > build-gpu/row_order_verdict
fwd_sweep FLEXATTN_SM90_ROW_ORDER "0 auto" document,prefixlm
FLEXATTN_SM90_BWD_CTA_ORDER=1 timeout $(cap 80 5) $CHECK --quick --only document --only causal --only sliding \
  > $O/check_cta.log 2>&1
echo "CTA_ORDER=1 --quick rc=$? $(pass_fail $O/check_cta.log) ($(el) s)"; grep -m3 "^FAIL" $O/check_cta.log
SWEEP_SUITE=long128 bwd_sweep FLEXATTN_SM90_BWD_CTA_ORDER "0 1" document,causal
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
