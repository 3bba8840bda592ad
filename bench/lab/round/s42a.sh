#!/usr/bin/env bash
# Session 42: FLEXATTN_DECODE_ROW_SPLIT (walks without a block mask split rows evenly, not 64-row tiles). Correctness
# first (gpu_decode_check, every case, with it on), then the decode suite (flexattn and cuDNN), on / off / off / on.
# Predicted: 8x8k 3238 -> ~3300-3330 GB/s (the longest split reads 1366 rows instead of 1408, -3 %); 64x4k (3 splits
# of 64 tiles: 22 vs 21.3) likewise up to +3 %; 1x128k (48 splits of 2048 tiles: 43 vs 42.7) within +-1 %; paged rows
# the same as contiguous.
. "$(dirname "$0")/lib.sh"
out_dir s42a; L=$O
deadline ${S42A_DEADLINE:-400}
BUILD_PY=ON build_gpu $O flexattn _C gpu_decode_check
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python:$PWD/bench PYTHONUNBUFFERED=1
FLEXATTN_DECODE_ROW_SPLIT=1 timeout $(cap 150 10) $DCHECK > $O/dcheck_on.log 2>&1
echo "dcheck row split rc=$? $(pass_fail $O/dcheck_on.log) ($(el) s)"; grep ^FAIL $O/dcheck_on.log | head -5; tail -2 $O/dcheck_on.log
decode_ab FLEXATTN_DECODE_ROW_SPLIT
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
