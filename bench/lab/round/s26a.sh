#!/usr/bin/env bash
# Session 26, one call: the checks of everything not yet run on a GPU, then (only if they all pass) the record run with
# the rotated forward loop on. Not yet run on a GPU: session 25's FLEXATTN_SM90_ROTATED=1 (opt-in), and session 26's
# defaults: range block masks built on the host (FLEXATTN_BLOCK_MASK_HOST_RANGES), the backward's preprocess / dQ
# convert as one shared program (KernelSet::aux), the backward's edge tiles in one copy (kMergeEdges).
# Predicted: all correct; the record's forward ms within +-1 % of session 22's (same wgmma schedule), compile_s of the
# eight cases <= 2 s at D = 128 and 64 (session 22: 1.3-3.9 s, forward-bound).
# Record here: python3 bench/run.py --record DIR/bench/long DIR/bench/decode [DIR/bench/extra].
. "$(dirname "$0")/lib.sh"
out_dir s26a; L=$O
deadline 585
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check gpu_block_mask_check
BMC=build-gpu/tests/gpu/block_mask_gpu/gpu_block_mask_check
timeout 40 $BMC --quick > $O/bm_host.log 2>&1; BM1=$?
FLEXATTN_BLOCK_MASK_HOST_RANGES=0 timeout 40 $BMC --quick > $O/bm_kernels.log 2>&1; BM2=$?
echo "block mask check: host ranges rc=$BM1 $(tail -1 $O/bm_host.log) | kernels only rc=$BM2 $(tail -1 $O/bm_kernels.log) ($(el) s)"
export FLEXATTN_SM90_ROTATED=1
quick_check 100
QC_FAIL=$(grep -c '^FAIL' $O/check.log); QC_PASS=$(grep -c '^PASS' $O/check.log)
for q in 1 17 129 1000 4097; do run_check --dtype bf16 -Q $q -D 128 --mask causal --backward; done
run_check --dtype bf16 -Q 1000 --kv 777 -D 128 --mask document:3 --backward
run_check --dtype bf16 -Q 129 --kv 1000 -D 128 --mask causal --score softcap:30 --backward
run_check --dtype bf16 -Q 1000 -D 128 --score relbias --backward
run_check --dtype bf16 -Q 1000 --kv 777 -D 64 --mask sliding_window:100 --backward
run_check --dtype f16 -Q 4097 -D 64
FLEXATTN_SM90_PERSISTENT=0 run_check --dtype bf16 -Q 1000 -D 128 --mask causal
run_check --dtype bf16 -Q 1000 -D 256 --mask causal
FLEXATTN_SM90_BWD=0 run_check --dtype bf16 -Q 1000 -D 128 --mask causal --backward
FLEXATTN_SM90=0 FLEXATTN_SM90_BWD=0 run_check --dtype f16 -Q 129 -D 64 --score alibi --backward
run_check --dtype bf16 -Q 1000 -D 128 --mask document:3 --backward --deterministic
run_check --dtype bf16 -Q 777 -D 64 --mask causal --backward --deterministic
run_check_summary
if [ "$BM1" = 0 ] && [ "$BM2" = 0 ] && [ "$QC_FAIL" = 0 ] && [ "$QC_PASS" -gt 0 ] && [ "$RUN_BAD" = 0 ]; then
  echo "all checks pass: record run with FLEXATTN_SM90_ROTATED=1"
  record_suites
else
  echo "a check failed: no record run"
fi
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
