#!/usr/bin/env bash
# Session 18 round 6 (issue 6): two dQ writer warps in deterministic mode at D = 128 (one dQ buffer): warps 1 and 2 take
# the even and the odd tiles, each warming its next rank (round 5: the warm alone did not help: one warp's chain per
# tile, rank + acquire + reductions + read + completion + release, is longer than a consumer step). Correctness:
# --quick --deterministic and --deterministic (bitwise repeats inside), --quick; det18.py default vs deterministic.
. "$(dirname "$0")/lib.sh"
out_dir s18f; L=$O
deadline 500
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
det_checks all
echo "== B=2 H=16 S=8192 bf16 backward ms, default | deterministic"
det_timing det18 150 DET8_DIMS="128 64"
quick_check 150
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
