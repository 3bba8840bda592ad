#!/usr/bin/env bash
# Session 12 (issue 6), second call: `flexattn run --check` with the ulp floor for gradients that cancel (L = 1) and
# f16 at D=256; then the hd256 suite side by side (flexattn's wide kernel, torch flex, SDPA cuDNN / flash),
# forward + backward, on full / causal / document / softcap. ~6 min.
. "$(dirname "$0")/lib.sh"
out_dir s12c; L=$O
deadline 560
BUILD_PY=ON build_gpu $O flexattn _C
for a in "-Q 1 --mask causal --dtype bf16" "-Q 1 --dtype f16" "-Q 1000 --mask causal --dtype f16" "-Q 129 --dtype f16 --score softcap:30"; do
  timeout $(cap 60 5) $F run --backend cuda --check --backward -D 256 -B 1 -H 4 --hkv 2 $a > $O/run.log 2>&1
  echo "run --check D=256 $a rc=$? $(grep -E '^check: ' $O/run.log) $(grep -E '^  d[qkv] ' $O/run.log | awk '{print $1, $5}' | tr '\n' ' ')"
done
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python
timeout $(cap 480 5) python3 bench/run.py --suite hd256 --backward --cases full,causal,document,softcap_causal --no-warm --out $O/bench > $O/bench.log 2>&1
echo "bench rc=$? ($(el) s)"; tail -9 $O/bench.log
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
