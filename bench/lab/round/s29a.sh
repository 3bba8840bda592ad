#!/usr/bin/env bash
# Prepared in session 28 for the next device: FLEXATTN_SM90_REL_DIAG=1 with the table fill's warp-uniform loop
# (session 28: wrong from the third kv tile on in the rotated loop, right peeled). First the full check of the
# t5 / relbias entries with it on (L 17 / 129 / 1000, offsets, deterministic) and memcheck --quick (now D=64 at 385),
# then s24b (run --check at odd lengths, T5 / relbias forward A/B and cold compile). Predicted: all pass; T5 D=128
# forward several times faster than its 81 TFLOP/s (H100 record), relbias_full within +-3 %.
# If it all passes: delete the peeled loop (FLEXATTN_SM90_ROTATED=0, gpu-test step gpu_attention_peeled).
. "$(dirname "$0")/lib.sh"
out_dir s29a; L=$O
deadline ${S29A_DEADLINE:-570}
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
FLEXATTN_SM90_REL_DIAG=1 timeout $(cap 200 10) $CHECK --only t5 --only relbias > $O/check_full.log 2>&1
echo "REL_DIAG=1 full check rc=$? $(pass_fail $O/check_full.log) ($(el) s)"; grep -m5 "^FAIL" $O/check_full.log
FLEXATTN_SM90_REL_DIAG=1 timeout $(cap 90 10) compute-sanitizer --tool memcheck --error-exitcode 3 $CHECK --quick \
  --only t5 --only relbias > $O/memcheck.log 2>&1
echo "REL_DIAG=1 memcheck --quick rc=$? $(pass_fail $O/memcheck.log) ($(el) s)"; grep -m3 "Invalid\|ERROR SUMMARY" $O/memcheck.log
S24B_DEADLINE=$(left) bash "$(dirname "$0")/s24b.sh"
