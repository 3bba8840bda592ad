#!/usr/bin/env bash
# Session 12, last call: the landed tree (TMA-store epilogue kept off the buffer-gradient-sum kernels and the first
# kernel at D + Dv >= 256). --quick, persistent auto on document / relbias, deterministic; then the long and hd256
# suites' forward + backward, flexattn only (relbias D=128 back at ~462?). ~6 min.
. "$(dirname "$0")/lib.sh"
out_dir s12f; L=$O
deadline 520
BUILD_PY=ON build_gpu $O gpu_attention_check flexattn _C
bwd_checks
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python
timeout $(cap 200 5) python3 bench/run.py --suite long --backward --impls flexattn --no-warm --reps 20 --out $O/b_long > $O/b_long.log 2>&1
echo "bench long rc=$? ($(el) s)"
timeout $(cap 120 5) python3 bench/run.py --suite hd256 --backward --impls flexattn --no-warm --out $O/b_256 > $O/b_256.log 2>&1
echo "bench hd256 rc=$? ($(el) s)"
for d in b_long b_256; do grep -E "^\| " $O/$d.log | tail -17 | cut -d'|' -f2,4,6,7,8; done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
