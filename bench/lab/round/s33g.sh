#!/usr/bin/env bash
# Session 33, last round: the rank warp beside the forced dQ claims in deterministic mode (make gpu-test's
# gpu_attention_dq_claim_det and _mixed_det steps, which the earlier rounds did not run) and memcheck of deterministic
# backwards on the D=64 kernel (document with GQA) and D=128 (sliding window, L=1000).
. "$(dirname "$0")/lib.sh"
out_dir s33g; L=$O
deadline ${S33G_DEADLINE:-230}
nvidia-smi --query-gpu=name --format=csv,noheader
build_gpu $O flexattn gpu_attention_check
FLEXATTN_SM90_BWD_DQ_CLAIM=1 timeout $(cap 50 5) $CHECK --quick --deterministic > $O/claim_det.log 2>&1
echo "DQ_CLAIM=1 --quick --deterministic rc=$? $(pass_fail $O/claim_det.log) ($(el) s)"; grep -m3 "^FAIL" $O/claim_det.log
FLEXATTN_SM90_BWD_DQ_CLAIM=1 FLEXATTN_SM90_BWD_DQ_CLAIM_MAX_KV=256 timeout $(cap 50 5) $CHECK --quick --deterministic \
  > $O/claim_mixed_det.log 2>&1
echo "DQ_CLAIM=1 MAX_KV=256 --quick --deterministic rc=$? $(pass_fail $O/claim_mixed_det.log) ($(el) s)"
grep -m3 "^FAIL" $O/claim_mixed_det.log
for args in "-D 64 --hkv 2 --mask document:3" "-D 128 --mask sliding_window:200"; do
  timeout $(cap 60 5) compute-sanitizer --tool memcheck $F run --backend cuda --check --dtype bf16 -B 2 -H 4 -Q 1000 \
    $args --backward --deterministic > $O/memcheck.log 2>&1
  echo "memcheck det $args rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' $O/memcheck.log) ($(el) s)"
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
