#!/usr/bin/env bash
# Session 34: the record run of the buffer-gradient sums per warpgroup and the leaner exact adds on the H200: long (with
# the deterministic column), decode, extra (relbias_learnable_full: issue 6's deterministic target), hd96.
. "$(dirname "$0")/lib.sh"
out_dir s34r; L=$O
deadline ${S34R_DEADLINE:-560}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C
record_suites
record_hd96
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
