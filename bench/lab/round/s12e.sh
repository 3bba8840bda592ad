#!/usr/bin/env bash
# Session 12 (issue 6, the D=128 document / sliding gap): (a) dK / dV through TMA stores from the freed K / V slabs
# (store_dk_dv_tma; FLEXATTN_SM90_BWD_TMA_STORE, default on) — the s12d profile had 6.6 % of the document
# backward's stall samples on the epilogue's per-pair global stores; (b) the producer issues a stage's Q / dO loads
# before its lse / delta round trip (bwd_fill_stage). Correctness: --quick (every head dim), persistent auto on
# document / relbias, deterministic; then the long suite's backward, flexattn only, default vs TMA_STORE=0, and
# hd256 causal / document. ~7 min.
. "$(dirname "$0")/lib.sh"
out_dir s12e; L=$O
deadline 580
BUILD_PY=ON build_gpu $O gpu_attention_check flexattn _C
bwd_checks
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python
cases=full,causal,sliding1024,document,relbias_full
timeout $(cap 120 5) python3 bench/run.py --suite long --backward --impls flexattn --cases $cases --no-warm --reps 20 --out $O/b_tma > $O/b_tma.log 2>&1
echo "bench tma rc=$? ($(el) s)"
FLEXATTN_SM90_BWD_TMA_STORE=0 timeout $(cap 120 5) python3 bench/run.py --suite long --backward --impls flexattn --cases $cases --no-warm --reps 20 --out $O/b_stg > $O/b_stg.log 2>&1
echo "bench stg rc=$? ($(el) s)"
timeout $(cap 90 5) python3 bench/run.py --suite hd256 --backward --impls flexattn --cases full,causal,document --no-warm --out $O/b_256 > $O/b_256.log 2>&1
echo "bench hd256 rc=$? ($(el) s)"
python3 - "$O" <<'PY'
import json, sys
o = sys.argv[1]
def rows(d):
    try: return {(r["case"], r["D"]): r for r in json.load(open(f"{o}/{d}/results.json"))["rows"] if r["impl"] == "flexattn"}
    except Exception as e: return {}
a, b = rows("b_tma"), rows("b_stg")
print("case D | fwd | bwd TMA store | bwd per-pair stores")
for k in sorted(a):
    print(k[0], k[1], "|", a[k].get("fwd_tflops"), "|", a[k].get("bwd_tflops"), "|", b.get(k, {}).get("bwd_tflops"))
for k, r in sorted(rows("b_256").items()): print(k[0], k[1], "| hd256 fwd", r.get("fwd_tflops"), "bwd", r.get("bwd_tflops"))
PY
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
