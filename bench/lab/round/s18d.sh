#!/usr/bin/env bash
# Session 18 round 4 (issue 6): where the deterministic backward's +43 % (causal D=128) goes. det18b.py switches parts of
# the ordered dQ writer off through a temporary probe (FLEXATTN_SM90_BWD_DQ_PROBE): the acquire wait, the completion
# wait + release, the rank. Not deterministic in the probe modes: timing only.
. "$(dirname "$0")/lib.sh"
out_dir s18d; L=$O
deadline 300
BUILD_PY=ON build_gpu $O flexattn _C
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
DET8_DIMS="128 64" timeout $(cap 220 20) python3 bench/lab/round/det18b.py > $O/det18b.log 2>&1; echo "det18b.py rc=$? ($(el) s)"
grep -v "^row" $O/det18b.log | grep -iE "error|Traceback" | head -5
echo "== B=2 H=16 S=8192 bf16 backward ms, default | deterministic (probe 0) and probes 1-3"
grep ^row $O/det18b.log | cut -c5-
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
