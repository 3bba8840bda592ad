#!/usr/bin/env bash
# Session 18 round 5 (issue 6): the deterministic dQ writer warms the next query tile's rank while the consumers compute
# it (bwd_dq_warm_rank; round 4: the rank on the critical path cost causal D=128 ~40 points of its +52 %), and the
# pipelined hand-off (FLEXATTN_SM90_BWD_DQ_PIPELINE) is gone (its registers). Correctness: gpu_attention_check
# --quick --deterministic (bitwise repeats inside) and --quick; then det18b.py default vs deterministic.
. "$(dirname "$0")/lib.sh"
out_dir s18e; L=$O
deadline 420
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
timeout $(cap 90 10) $CHECK --quick --deterministic > $O/det.log 2>&1
echo "check --quick --deterministic rc=$? $(pass_fail $O/det.log) ($(el) s)"; grep ^FAIL $O/det.log | head -3
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
DET18_PROBES="0" DET8_DIMS="128 64" timeout $(cap 150 20) python3 bench/lab/round/det18b.py > $O/det18b.log 2>&1
echo "det18b.py rc=$? ($(el) s)"; grep -v "^row" $O/det18b.log | grep -iE "error|Traceback" | head -5
echo "== B=2 H=16 S=8192 bf16 backward ms, default | deterministic (probe 0 = the deterministic mode as built)"
grep ^row $O/det18b.log | cut -c5-
timeout $(cap 150 10) $CHECK --quick > $O/check.log 2>&1
echo "check --quick rc=$? $(pass_fail $O/check.log) ($(el) s)"; grep ^FAIL $O/check.log | head -3
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
