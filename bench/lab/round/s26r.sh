#!/usr/bin/env bash
# Session 26 record run, right after s25a on the warm machine (its build-gpu reused): the tree of this session (range
# masks built on the host, the backward's shared aux program, edge tiles in one copy) with the rotated forward loop
# on (FLEXATTN_SM90_ROTATED=1, the default flipped after s25a's checks). Long suite with backward and flexattn's
# deterministic backward, all peers, cold compiles; decode suite; the extra cases when time is left.
# Record here: python3 bench/run.py --record DIR/bench/long DIR/bench/decode [DIR/bench/extra].
# Predicted: compile_s of the eight cases <= 2 s at D = 128 and 64 (session 22: 1.3-3.9 s; forward-bound there).
. "$(dirname "$0")/lib.sh"
out_dir s26r; L=$O
deadline ${S26R_DEADLINE:-480}
BUILD_PY=ON build_gpu $O flexattn _C
export FLEXATTN_SM90_ROTATED=1
record_suites
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
