#!/usr/bin/env bash
# Session 21 round 4 (prepared in session 21, which had no device; optional, after s21a-c): the persistent backward at
# D = 128 again (FLEXATTN_SM90_BWD_PERSISTENT=1; last measured there in session 6, before the v2 consumer's dQ
# buffers, the TMA-store epilogue and the launch order: sliding 363 -> 353, document 277 -> 286). Issue 6's open
# targets are the short walks (sliding 1.29x, document 1.25x of torch flex; 1.5x wanted), where a CTA's prologue and
# epilogue are a large share of its time; the persistent kernel loads the next work tile's K / V during the epilogue.
# Correctness first (--quick with it on), then the backward A/B/B/A on full, causal, sliding and document.
# Predicted: sliding / document +2-5 %, full -3 % (session 6's sign), causal flat.
. "$(dirname "$0")/lib.sh"
out_dir s21d; L=$O
deadline ${S21D_DEADLINE:-400}
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
FLEXATTN_SM90_BWD_PERSISTENT=1 quick_check 100 --only causal --only document --only sliding --only full
bwd_sweep FLEXATTN_SM90_BWD_PERSISTENT "0 1" full,causal,sliding1024,document
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
