#!/usr/bin/env bash
# Session 11's first call: s10g (correctness of the two paths no GPU has run: persistent auto with ALiBi's affine
# bias at D=64; deterministic dense calls on their grouped-order set) folded into s11a (persistent auto: --quick
# and the long suite's backward, flexattn only, unset vs auto). One build, ~7 min.
. "$(dirname "$0")/lib.sh"
out_dir s11c; L=$O
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=ON -DFLEXATTN_BUILD_TESTS=ON > $O/configure.log 2>&1
cmake --build build-gpu -j16 --target gpu_attention_check flexattn _C > $O/build.log 2>&1 || { grep -E "error" $O/build.log | head -20; exit 1; }
echo "build $(el) s"
timeout 90 $CHECK --quick --deterministic > $O/det.log 2>&1
echo "--quick --deterministic rc=$? $(pass_fail $O/det.log) ($(el) s)"; grep ^FAIL $O/det.log | head -3
FLEXATTN_SM90_BWD_PERSISTENT=auto timeout 200 $CHECK --quick > $O/check.log 2>&1; echo "check --quick auto rc=$? $(pass_fail $O/check.log) ($(el) s)"
grep ^FAIL $O/check.log | head -3
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python
for c in default auto; do
  env $([ $c = auto ] && echo FLEXATTN_SM90_BWD_PERSISTENT=auto) timeout 170 python3 bench/run.py --suite long --backward \
    --impls flexattn --no-warm --reps 20 --out $O/bench_$c > $O/bench_$c.log 2>&1; echo "bench $c rc=$? ($(el) s)"
done
echo "== flexattn backward TFLOP/s, default / auto"
python3 - "$O" <<'PY'
import json, sys
rows = {c: {(r["case"], r["D"]): r for r in json.load(open(f"{sys.argv[1]}/bench_{c}/results.json"))["rows"]} for c in ("default", "auto")}
for (case, d), r in sorted(rows["default"].items(), key=lambda kv: (kv[0][1], kv[0][0])):
    print(f"{case:16s} D={d:3d} {r.get('bwd_tflops') or 0:6.0f} / {rows['auto'].get((case, d), {}).get('bwd_tflops') or 0:6.0f}")
PY
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
