#!/usr/bin/env bash
# Session 18 round 5 (issue 6): the deterministic dQ writer warms the next query tile's rank while the consumers compute
# it (bwd_dq_warm_rank; round 4: the rank on the critical path cost causal D=128 ~40 points of its +52 %), and the
# pipelined hand-off (FLEXATTN_SM90_BWD_DQ_PIPELINE) is gone (its registers). Correctness: gpu_attention_check
# --quick --deterministic (bitwise repeats inside) and --quick; then det18.py default vs deterministic.
. "$(dirname "$0")/lib.sh"
out_dir s18e; L=$O
deadline 420
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
det_checks
echo "== B=2 H=16 S=8192 bf16 backward ms, default | deterministic"
det_timing det18 150 DET8_DIMS="128 64"
quick_check 150
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
