"""fwd_sweep / bwd_sweep (lib.sh): KEY (fwd_ms or bwd_ms) per case and head dim of their bench/run.py runs under DIR
(fwd_<run>_<value>, one run per value in the order given, then reversed), and per value its best run against the
first value's best (> 1: faster than the first value). Usage: sweep_table.py DIR VAR KEY V1 V2 ..."""
import json
import os
import re
import sys

o, var, key, values = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
runs = sorted((int(m.group(1)), m.group(2)) for d in os.listdir(o)
              if os.path.isdir(os.path.join(o, d)) and (m := re.fullmatch(r"fwd_(\d+)_(.+)", d)))
rows = {}  # (case, D) -> {run index: ms}
for n, v in runs:
    f = os.path.join(o, f"fwd_{n}_{v}", "results.json")
    if not os.path.exists(f):
        continue
    for x in json.load(open(f))["rows"]:
        if x["impl"] == "flexattn" and x.get(key):
            rows.setdefault((x["case"], x["D"]), {})[n] = x[key]
value_of = dict(runs)
print(f"{key} per run ({var} = " + " ".join(v for _, v in runs) + "); then best of " + values[0] + " / best of each value")
for (c, d), ms in sorted(rows.items()):
    best = {v: min((t for n, t in ms.items() if value_of[n] == v), default=None) for v in values}
    base = best[values[0]]
    ratios = " ".join(f"{v}:{base / best[v]:.3f}" if base and best[v] else f"{v}:-" for v in values)
    print(f"{c} {d} | " + " ".join(f"{ms[n]:.4f}" if n in ms else "-" for n, _ in runs) + " | " + ratios)
