#!/usr/bin/env bash
# Session 13 round 2: the producer's L1 prefetch of the mods' gathers (codegen's V::prefetch,
# FLEXATTN_SM90_MOD_PREFETCH). --quick on the corpus mods that read buffers, then forward and backward A/B (prefetch on /
# FLEXATTN_SM90_PREFETCH=0) at B=2 H=16 S=8192 for relbias_full and document, D=128 and 64, flexattn only;
# then host13.py (is the sliding1024 forward row host-bound?). ~5 min.
. "$(dirname "$0")/lib.sh"
out_dir s13b; L=$O
deadline 400
BUILD_PY=ON build_gpu $O gpu_attention_check flexattn _C
quick_check 100 --only relbias --only document --only t5 --only text --only alibi_slopes
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
for v in 1 0; do
  FLEXATTN_SM90_PREFETCH=$v timeout $(cap 100 5) python3 bench/run.py --suite long --backward --impls flexattn --cases relbias_full,document --no-warm --reps 30 --out $O/b$v > $O/b$v.log 2>&1
  echo "bench prefetch=$v rc=$? ($(el) s)"; grep -E "^\| (relbias|document)" $O/b$v.log | cut -d'|' -f2,4,6,7
done
timeout $(cap 90 5) python3 bench/lab/round/host13.py > $O/host.log 2>&1; echo "host rc=$? ($(el) s)"; cat $O/host.log | tail -5
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
