#!/usr/bin/env bash
# Session 18 round 10 (issue 6): the deterministic backward's cost at D = 128 again (tree with the review fix), for the
# run-to-run spread of round 7's +17.7 % (causal): det18.py twice in one call.
. "$(dirname "$0")/lib.sh"
out_dir s18j; L=$O
deadline 240
BUILD_PY=ON build_gpu $O flexattn _C
for r in 1 2; do det_timing det18_$r 80 DET8_DIMS="128"; done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
