#!/usr/bin/env bash
# Session 11, issue 6 (D=64 document backward): the interior partial tiles of the first backward kernel without the
# bounds test (mask_mod's loads no longer inside a per-entry branch) and buffer reads through __ldg (equal
# addresses loaded once per tile; also the forward's). (1) --quick, default and persistent auto; document / relbias
# at odd lengths; (2) the long suite fwd + bwd, flexattn only, default vs FLEXATTN_SM90_BWD_PERSISTENT=auto.
. "$(dirname "$0")/lib.sh"
out_dir s11d; L=$O
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=ON -DFLEXATTN_BUILD_TESTS=ON > $O/configure.log 2>&1
cmake --build build-gpu -j16 --target gpu_attention_check flexattn _C > $O/build.log 2>&1 || { grep -E "error" $O/build.log | head -20; exit 1; }
echo "build $(el) s"
timeout 150 $CHECK --quick > $O/check.log 2>&1; echo "check --quick rc=$? $(pass_fail $O/check.log) ($(el) s)"; grep ^FAIL $O/check.log | head -3
FLEXATTN_SM90_BWD_PERSISTENT=auto timeout 150 $CHECK --quick --only document --only relbias --only alibi > $O/check_auto.log 2>&1
echo "check --quick auto doc/relbias/alibi rc=$? $(pass_fail $O/check_auto.log) ($(el) s)"; grep ^FAIL $O/check_auto.log | head -3
python3 -c "import numpy as np; np.save('$O/doc.npy', (np.arange(4097) * 7 // 4097).astype(np.int32))"
for Lq in 129 1000 4097; do for D in 64 128; do
  timeout 60 $F run --backend cuda --check --backward --dtype bf16 -B 2 -H 4 -Q $Lq -D $D \
    --mask-expr "doc_ids[q_idx] == doc_ids[kv_idx] && q_idx >= kv_idx" --buffer doc_ids=$O/doc.npy > $O/run_${Lq}_$D.log 2>&1
  echo "run --check doc L=$Lq D=$D rc=$? $(tail -1 $O/run_${Lq}_$D.log)"
done; done
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python
for c in default auto; do
  env $([ $c = auto ] && echo FLEXATTN_SM90_BWD_PERSISTENT=auto) timeout 170 python3 bench/run.py --suite long --backward \
    --impls flexattn --no-warm --reps 20 --out $O/bench_$c > $O/bench_$c.log 2>&1; echo "bench $c rc=$? ($(el) s)"
done
echo "== flexattn TFLOP/s fwd default | bwd default / auto"
python3 - "$O" <<'PY'
import json, sys
rows = {c: {(r["case"], r["D"]): r for r in json.load(open(f"{sys.argv[1]}/bench_{c}/results.json"))["rows"]} for c in ("default", "auto")}
for (case, d), r in sorted(rows["default"].items(), key=lambda kv: (kv[0][1], kv[0][0])):
    a = rows["auto"].get((case, d), {})
    print(f"{case:16s} D={d:3d} fwd {r.get('fwd_tflops') or 0:5.0f} | bwd {r.get('bwd_tflops') or 0:5.0f} / {a.get('bwd_tflops') or 0:5.0f}")
PY
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
