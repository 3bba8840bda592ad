#!/usr/bin/env bash
# Session 19 round 8: the backward's query walk merges the partial and full lists in ascending order (the record of
# round 7 had the deterministic sliding window at 12.4 ms against 0.84: each kv tile waited for the whole walk of the
# one above it). Checks (--deterministic set, --quick), then the record run again on this tree.
. "$(dirname "$0")/lib.sh"
out_dir s19h; L=$O
deadline 540
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
det_checks all
quick_check 80
record_suites
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
