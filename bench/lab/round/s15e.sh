#!/usr/bin/env bash
# Session 15 record run (the backward gather, the position clamp): bench/run.py --suite long --backward and --suite decode,
# compile jobs 2 (a variant's forward and backward side by side). ~8 min.
. "$(dirname "$0")/lib.sh"
out_dir s15e; L=$O
deadline 580
BUILD_PY=ON build_gpu $O flexattn _C
rm -rf $FLEXATTN_CACHE_DIR
record_suites
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
