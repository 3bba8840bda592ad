#!/usr/bin/env bash
# Session 33: the record run of 5a54eaa + the NaN-fill skip (the rank warp, deterministic buffer gradients, the padded
# backward by default) on the H200: long (with the deterministic column), decode, extra, hd96.
. "$(dirname "$0")/lib.sh"
out_dir s33r; L=$O
deadline ${S33R_DEADLINE:-560}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C
record_suites
if [ "$(left)" -ge 70 ]; then
  timeout $(cap 100 10) python3 bench/run.py --suite hd96 --cases full,causal --backward --no-warm --reps 20 \
    --out $OUT/bench/hd96 > $OUT/bench/hd96.log 2>&1
  echo "hd96 rc=$? ($(el) s)"; grep -E "^\|" $OUT/bench/hd96.log | tail -9 | cut -d'|' -f2,4,6,7,8,10,11,12
fi
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
