#!/usr/bin/env bash
# Session 21 round 3 (prepared in session 21, which had no device): the decode family's last-CTA merge
# (FLEXATTN_DECODE_MERGE=1: the last split of each row tile to finish merges the tile's partials, counted with a
# self-resetting atomicInc per row tile; no combine kernel after the split kernel). Correctness first
# (gpu_decode_check, every case, with it on: its CUDA-graph case takes the combine kernel, no counters while
# capturing), then the 8x8k step's profile and the decode suite (flexattn and cuDNN), on / off / off / on.
# Predicted: 8x8k 3191 -> ~3300 GB/s (the combine's tail, 4.4 us of ~85, becomes the last CTA's merge, ~1-1.5 us);
# 1x128k and 64x4k within +-2 %.
. "$(dirname "$0")/lib.sh"
out_dir s21c; L=$O
deadline 420
BUILD_PY=ON build_gpu $O flexattn _C gpu_decode_check
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python:$PWD/bench PYTHONUNBUFFERED=1
FLEXATTN_DECODE_MERGE=1 timeout $(cap 150 10) $DCHECK > $O/dcheck_on.log 2>&1
echo "dcheck merge rc=$? $(pass_fail $O/dcheck_on.log) ($(el) s)"; grep ^FAIL $O/dcheck_on.log | head -5; tail -2 $O/dcheck_on.log
FLEXATTN_DECODE_MERGE=1 timeout $(cap 60 10) python3 bench/lab/round/decode_profile17.py flexattn > $O/profile_on.log 2>&1
echo "profile on rc=$? ($(el) s)"; grep -E "^==|flexattn_decode|span" $O/profile_on.log | head -6
decode_ab FLEXATTN_DECODE_MERGE
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
