#!/usr/bin/env bash
# Session 20 round 5: the deterministic dQ handed on in parts (bwd_dq_parts: 4 column parts at D = 128, 2 at D = 64,
# a semaphore each): the next kv tile's first part starts once this one's first part completed. det18.py at D = 128
# and 64, then the whole --deterministic set and --quick.
. "$(dirname "$0")/lib.sh"
out_dir s20e; L=$O
deadline 420
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
det_timing det 150 DET8_DIMS="128 64"
det_checks all
quick_check 60
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
