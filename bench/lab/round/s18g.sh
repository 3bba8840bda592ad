#!/usr/bin/env bash
# Session 18 round 7 (issue 6): the two dQ writer warps at D = 64 too (two dQ buffers: a warp per buffer); round 6 had
# them at D = 128 only (causal +52 -> +21 %, full +2 %, document +18 %; D = 64 causal +48 %, one writer).
# --quick --deterministic and --deterministic (bitwise repeats inside), --quick; det18b.py default vs deterministic.
. "$(dirname "$0")/lib.sh"
out_dir s18g; L=$O
deadline 500
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
timeout $(cap 90 10) $CHECK --quick --deterministic > $O/det.log 2>&1
echo "check --quick --deterministic rc=$? $(pass_fail $O/det.log) ($(el) s)"; grep ^FAIL $O/det.log | head -3
timeout $(cap 150 10) $CHECK --deterministic > $O/det_all.log 2>&1
echo "check --deterministic rc=$? $(pass_fail $O/det_all.log) ($(el) s)"; grep ^FAIL $O/det_all.log | head -3
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
DET18_PROBES="0" DET8_DIMS="128 64" timeout $(cap 150 20) python3 bench/lab/round/det18b.py > $O/det18b.log 2>&1
echo "det18b.py rc=$? ($(el) s)"; grep -v "^row" $O/det18b.log | grep -iE "error|Traceback" | head -5
echo "== B=2 H=16 S=8192 bf16 backward ms, default | deterministic (probe 0 = the deterministic mode as built)"
grep ^row $O/det18b.log | cut -c5-
timeout $(cap 150 10) $CHECK --quick > $O/check.log 2>&1
echo "check --quick rc=$? $(pass_fail $O/check.log) ($(el) s)"; grep ^FAIL $O/check.log | head -3
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
