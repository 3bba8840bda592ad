#!/usr/bin/env bash
# Session 18 round 10 (issue 6): the deterministic backward's cost at D = 128 again (tree with the review fix), for the
# run-to-run spread of round 7's +17.7 % (causal): det18b.py twice in one call.
. "$(dirname "$0")/lib.sh"
out_dir s18j; L=$O
deadline 240
BUILD_PY=ON build_gpu $O flexattn _C
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
for r in 1 2; do
  DET18_PROBES="0" DET8_DIMS="128" timeout $(cap 80 10) python3 bench/lab/round/det18b.py > $O/det18b_$r.log 2>&1
  echo "run $r rc=$? ($(el) s)"; grep ^row $O/det18b_$r.log | cut -c5-
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
