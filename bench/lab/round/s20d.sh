#!/usr/bin/env bash
# Session 20 round 4: the record run on the session-20 tree (v2 with two dQ buffers; the forward unchanged): long suite
# with backward and flexattn's deterministic backward, all peers; decode suite.
# Record here: python3 bench/run.py --record DIR/bench/long DIR/bench/decode.
. "$(dirname "$0")/lib.sh"
out_dir s20d; L=$O
deadline 570
BUILD_PY=ON build_gpu $O flexattn _C
record_suites
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
