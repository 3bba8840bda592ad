#!/usr/bin/env bash
# Session 33: issue 5's document forward is 1.477x torch flex on the H200 record (353 vs 239 TFLOP/s; 1.5x wanted).
# FLEXATTN_SM90_ROW_ORDER=1 (longest rows first for masks whose natural order is not) measured document 0.340 -> 0.334
# ms in session 10, before the tie rule and the tile queue; it costs one dependent load in the producer's claim chain
# (sliding -2-3 % in session 24). A/B/B/A of the forward on document (D 128 and 64) and prefix-LM D=128.
# Predicted: document +1.5-2 %.
. "$(dirname "$0")/lib.sh"
out_dir s33f; L=$O
deadline ${S33F_DEADLINE:-200}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C
fwd_sweep FLEXATTN_SM90_ROW_ORDER "0 1" document,prefixlm
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
