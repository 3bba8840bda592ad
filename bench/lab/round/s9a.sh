#!/usr/bin/env bash
# For session 9's first device call: `make gpu-test` part 2 (not run since the ordered deterministic dQ landed) and the
# two deterministic steps added in session 8 (the sm80 dQ pass with FLEXATTN_SM90_BWD_ORDERED_DQ=0, the opt-in
# pipelined hand-off FLEXATTN_SM90_BWD_DQ_PIPELINE=1 on every deterministic case). Then det8.sh for the speed of both
# deterministic modes (PART=det).
. "$(dirname "$0")/lib.sh"
case "${PART:-gpu}" in
gpu)
  GPU_TEST_ONLY="gpu_attention_det_pass gpu_attention_det_pipeline gpu_attention_sm80 gpu_attention_no_decode memcheck_sm80 gpu_block_mask gpu_decode gpu_decode_cp_async gpu_cp gpu_library_mods python_gpu" \
    timeout 570 bash scripts/gpu_test.sh > $OUT/gpu_test2.txt 2>&1; echo "gpu-test part 2 + det rc=$?"
  tail -18 $OUT/gpu_test2.txt ;;
det)
  bash "$(dirname "$0")/det8.sh" ;;
esac
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
