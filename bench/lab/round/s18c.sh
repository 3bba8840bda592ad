#!/usr/bin/env bash
# Session 18 round 3 (issue 6): the deterministic backward's ordered dQ in 2 and 4 chains (FLEXATTN_SM90_BWD_DQ_CHAINS):
# kv tile j adds into copy j mod n of dq_accum behind j + n only, so a causal CTA gets n steps of slack for the
# hand-off and a full-attention launch staggers n times less. Correctness (gpu_attention_check --quick --deterministic,
# bitwise repeats inside, with 2 and 4 chains), then det18.py: default vs deterministic with 1 / 2 / 4 chains.
. "$(dirname "$0")/lib.sh"
out_dir s18c; L=$O
deadline 450
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
for c in 2 4; do
  FLEXATTN_SM90_BWD_DQ_CHAINS=$c timeout $(cap 90 10) $CHECK --quick --deterministic > $O/det_c$c.log 2>&1
  echo "check --quick --deterministic chains $c rc=$? $(pass_fail $O/det_c$c.log) ($(el) s)"; grep ^FAIL $O/det_c$c.log | head -3
done
timeout $(cap 60 10) $CHECK --quick --only causal --only document > $O/quick.log 2>&1
echo "check --quick causal/document rc=$? $(pass_fail $O/quick.log) ($(el) s)"; grep ^FAIL $O/quick.log | head -3
echo "== B=2 H=16 S=8192 bf16 backward ms, default | deterministic with n chains"
det_timing det18 240 DET18_VAR=FLEXATTN_SM90_BWD_DQ_CHAINS DET18_VALUES="1 2 4"
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
