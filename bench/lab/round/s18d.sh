#!/usr/bin/env bash
# Session 18 round 4 (issue 6): where the deterministic backward's +43 % (causal D=128) goes. det18.py switches parts of
# the ordered dQ writer off through a temporary probe (FLEXATTN_SM90_BWD_DQ_PROBE): the acquire wait, the completion
# wait + release, the rank. Not deterministic in the probe modes: timing only.
. "$(dirname "$0")/lib.sh"
out_dir s18d; L=$O
deadline 300
BUILD_PY=ON build_gpu $O flexattn _C
echo "== B=2 H=16 S=8192 bf16 backward ms, default | deterministic (probe 0) and probes 1-3"
det_timing det18 220 DET8_DIMS="128 64" DET18_VAR=FLEXATTN_SM90_BWD_DQ_PROBE DET18_VALUES="0 1 2 3"
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
