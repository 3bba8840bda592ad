#!/usr/bin/env bash
# Session 20 round 3: the late q_free (FLEXATTN_SM90_LATE_Q_FREE=1: the persistent forward's thread 0 waits for its O
# store's read after the next tile's first Q K^T instead of in the epilogue), checked with --quick and timed A/B/B/A
# on the forward (flexattn only, B=2 H=16 S=8192).
. "$(dirname "$0")/lib.sh"
out_dir s20c; L=$O
deadline 560
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
FLEXATTN_SM90_LATE_Q_FREE=1 timeout $(cap 70 5) $CHECK --quick > $O/check_late.log 2>&1
echo "check --quick late rc=$? $(pass_fail $O/check_late.log) ($(el) s)"; grep ^FAIL $O/check_late.log | head -3
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
CASES=full,causal,sliding1024,document,prefixlm,alibi_causal,softcap_causal
for r in a0 b1 b2 a3; do
  v=0; [ "${r:0:1}" = b ] && v=1
  FLEXATTN_SM90_LATE_Q_FREE=$v timeout $(cap 90 10) python3 bench/run.py --suite long --impls flexattn --cases $CASES \
    --no-warm --reps 30 --cache-dir $PWD/build-gpu/bench-cache --out $O/fwd_$r > $O/fwd_$r.log 2>&1
  echo "fwd $r (late=$v) rc=$? ($(el) s)"
done
python3 - "$O" <<'PY'
import json, sys, os
o = sys.argv[1]; rows = {}
for r in ["a0", "b1", "b2", "a3"]:
    f = os.path.join(o, f"fwd_{r}", "results.json")
    if not os.path.exists(f): continue
    for x in json.load(open(f))["rows"]:
        if x["impl"] == "flexattn" and x["fwd_ms"]: rows.setdefault((x["case"], x["D"]), {})[r] = x["fwd_ms"]
print("fwd ms: case D | off a0 | on b1 | on b2 | off a3 | on/off")
for (c, d), v in sorted(rows.items()):
    off = [v[r] for r in ("a0", "a3") if r in v]; on = [v[r] for r in ("b1", "b2") if r in v]
    gain = f"{min(off) / min(on):.3f}" if off and on else "-"
    print(c, d, "|", " | ".join(f"{v[r]:.4f}" if r in v else "-" for r in ["a0", "b1", "b2", "a3"]), "|", gain)
PY
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
