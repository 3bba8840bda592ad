"""fwd_ab (lib.sh): the forward ms per case and head dim of its four bench/run.py runs (a0, b1, b2, a3 under DIR: switch
off, on, on, off), and the best on over the best off."""
import json
import os
import sys

RUNS = ["a0", "b1", "b2", "a3"]
o = sys.argv[1]
rows = {}
for r in RUNS:
    f = os.path.join(o, f"fwd_{r}", "results.json")
    if not os.path.exists(f):
        continue
    for x in json.load(open(f))["rows"]:
        if x["impl"] == "flexattn" and x["fwd_ms"]:
            rows.setdefault((x["case"], x["D"]), {})[r] = x["fwd_ms"]
print("fwd ms: case D | off a0 | on b1 | on b2 | off a3 | on/off")
for (c, d), v in sorted(rows.items()):
    off = [v[r] for r in ("a0", "a3") if r in v]
    on = [v[r] for r in ("b1", "b2") if r in v]
    gain = f"{min(off) / min(on):.3f}" if off and on else "-"
    print(c, d, "|", " | ".join(f"{v[r]:.4f}" if r in v else "-" for r in RUNS), "|", gain)
