#!/usr/bin/env bash
# Session 12, last minutes: the TMA-store epilogue as a compiled-in define that get_kernel_set drops first when a
# kernel spills (the constant-relbias v2 at D=128 had lost its bulk dQ path: 462 -> 387). --quick on relbias /
# causal / document, then relbias / causal / document at the long shape, flexattn only. ~2.5 min.
. "$(dirname "$0")/lib.sh"
out_dir s12g; L=$O
deadline 170
BUILD_PY=ON build_gpu $O gpu_attention_check flexattn _C
quick_check 60 --only relbias --only causal --only document
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python
timeout $(cap 80 5) python3 bench/run.py --suite long --backward --impls flexattn --cases relbias_full,causal,document --no-warm --reps 20 --out $O/b > $O/b.log 2>&1
echo "bench rc=$? ($(el) s)"; grep -E "^\| " $O/b.log | tail -7 | cut -d'|' -f2,4,6,7
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
