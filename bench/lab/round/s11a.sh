#!/usr/bin/env bash
# For session 11 (issue 6, D=64 backward): FLEXATTN_SM90_BWD_PERSISTENT=auto (the persistent backward for D=64 calls
# outside deterministic mode; session 10 measured document +19 %, sliding +5 %, causal -1 % with it forced on).
# (1) gpu_attention_check --quick with auto; (2) bench/run.py --suite long --backward, flexattn only, unset vs auto
# (only the D=64 rows can differ), every case. ~6 min.
. "$(dirname "$0")/lib.sh"
out_dir s11a; L=$O
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=ON -DFLEXATTN_BUILD_TESTS=ON > $O/configure.log 2>&1
cmake --build build-gpu -j16 --target gpu_attention_check flexattn _C > $O/build.log 2>&1 || { grep -E "error" $O/build.log | head -20; exit 1; }
echo "build $(el) s"
FLEXATTN_SM90_BWD_PERSISTENT=auto timeout 200 $CHECK --quick > $O/check.log 2>&1; echo "check --quick auto rc=$? $(pass_fail $O/check.log) ($(el) s)"
grep ^FAIL $O/check.log | head -3
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python
for c in default auto; do
  env $([ $c = auto ] && echo FLEXATTN_SM90_BWD_PERSISTENT=auto) timeout 170 python3 bench/run.py --suite long --backward \
    --impls flexattn --no-warm --reps 20 --out $O/bench_$c > $O/bench_$c.log 2>&1; echo "bench $c rc=$? ($(el) s)"
done
echo "== flexattn backward TFLOP/s D=64, default / auto"
python3 - "$O" <<'PY'
import json, sys
rows = {c: {(r["case"], r["D"]): r for r in json.load(open(f"{sys.argv[1]}/bench_{c}/results.json"))["rows"]} for c in ("default", "auto")}
for (case, d), r in rows["default"].items():
    if d == 64: print(f"{case:16s} {r.get('bwd_tflops') or 0:6.0f} / {rows['auto'].get((case, d), {}).get('bwd_tflops') or 0:6.0f}")
PY
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
