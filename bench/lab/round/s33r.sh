#!/usr/bin/env bash
# Session 33: the record run of 5a54eaa + the NaN-fill skip (the rank warp, deterministic buffer gradients, the padded
# backward by default) on the H200: long (with the deterministic column), decode, extra, hd96.
. "$(dirname "$0")/lib.sh"
out_dir s33r; L=$O
deadline ${S33R_DEADLINE:-560}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C
record_suites
record_hd96
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
