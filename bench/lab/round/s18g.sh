#!/usr/bin/env bash
# Session 18 round 7 (issue 6): the two dQ writer warps at D = 64 too (two dQ buffers: a warp per buffer); round 6 had
# them at D = 128 only (causal +52 -> +21 %, full +2 %, document +18 %; D = 64 causal +48 %, one writer).
# --quick --deterministic and --deterministic (bitwise repeats inside), --quick; det18.py default vs deterministic.
. "$(dirname "$0")/lib.sh"
out_dir s18g; L=$O
deadline 500
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
det_checks all
echo "== B=2 H=16 S=8192 bf16 backward ms, default | deterministic"
det_timing det18 150 DET8_DIMS="128 64"
quick_check 150
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
