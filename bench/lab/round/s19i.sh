#!/usr/bin/env bash
# Prepared in session 19, not run (no device time left): v2 (D = 128) with two dQ buffers (the layout's dQ tiles right
# after the dS^T tiles) and the early turn, from bench/lab/patches/s19-v2-two-dq-buffers.patch (apply it first:
# git apply bench/lab/patches/s19-v2-two-dq-buffers.patch; it compiles clean in every compile tier, no spill).
# det18.py at D = 128 first (default and deterministic times, bitwise repeats, grads against the default mode's), then
# --quick --deterministic, then --quick (the default mode's v2 changes too: its writer alternates two buffers).
. "$(dirname "$0")/lib.sh"
out_dir s19i; L=$O
deadline 300
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
det_timing det 60 DET8_DIMS="128"
det_checks
quick_check 120
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
