#!/usr/bin/env bash
# (The switch FLEXATTN_SM90_BWD_DET_LAUNCH was removed after round 2: no gain in GPU time; bench/RESULTS.md session 19.)
# Session 19 round 1 (issue 6): the deterministic backward's launch order (FLEXATTN_SM90_BWD_DET_LAUNCH). Causal
# variants with a block mask now launch longest first (auto); the model said the descending launch costs causal
# B=2 H=16 S=8192 +7 %. Checks (auto, and ascending forced on every case), then det18.py with descending / ascending,
# then bench/run.py --deterministic on one case (its first GPU run).
. "$(dirname "$0")/lib.sh"
out_dir s19a; L=$O
deadline 540
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
det_checks
FLEXATTN_SM90_BWD_DET_LAUNCH=ascending timeout $(cap 90 10) $CHECK --quick --deterministic > $O/det_asc.log 2>&1
echo "check --quick --deterministic, ascending forced rc=$? $(pass_fail $O/det_asc.log) ($(el) s)"; grep ^FAIL $O/det_asc.log | head -3
det_timing det19 240 DET8_DIMS="128 64" DET18_VAR=FLEXATTN_SM90_BWD_DET_LAUNCH DET18_VALUES="descending ascending"
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
timeout $(cap 90 10) python3 bench/run.py --suite long --cases causal --impls flexattn --backward --deterministic --no-warm \
  --reps 20 --out $O/bench > $O/bench.log 2>&1
echo "bench --deterministic rc=$? ($(el) s)"; grep -E "^\|" $O/bench.log | tail -4
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
