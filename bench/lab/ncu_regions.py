#!/usr/bin/env python3
"""Where a kernel's warps spend their time, from an ncu source page exported as CSV
(`ncu --import X.ncu-rep --page source --csv --print-source sass > X.csv`, gzip allowed).

Groups the SASS instructions by execution count (a loop body, a per-tile prologue, the producer's one thread
each have their own count), prints each class's share of the warp stall samples with its top stall reasons,
then the single instructions with the most samples. Session 9 found the document forward's per-work-tile
overhead and its Q wait this way (bench/RESULTS.md).
Usage: ncu_regions.py FILE.csv[.gz] [--top N]"""
import collections
import csv
import gzip
import sys


def rows_of(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = list(csv.reader(f))
    head = next(i for i, r in enumerate(rows) if "Address" in r and "Source" in r)
    return rows[head], rows[head + 1:]


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    top = int(argv[argv.index("--top") + 1]) if "--top" in argv else 25
    h, data = rows_of(argv[1])
    ia, isrc = h.index("Address"), h.index("Source")
    ism, iex = h.index("Warp Stall Sampling (All Samples)"), h.index("Instructions Executed")
    stalls = [i for i, x in enumerate(h) if x.startswith("stall_") and "Not Issued" not in x]
    num = lambda r, i: float(r[i].replace(",", "") or 0)
    total = sum(num(r, ism) for r in data) or 1.0
    classes = collections.defaultdict(lambda: [0.0, 0, collections.Counter()])
    for r in data:
        c = classes[int(num(r, iex))]
        c[0] += num(r, ism)
        c[1] += 1
        for i in stalls:
            c[2][h[i][6:]] += num(r, i)
    print(f"{len(data)} instructions, {total:.0f} samples")
    print("executions  share  instrs  top stall reasons")
    for ex, (s, n, why) in sorted(classes.items(), key=lambda kv: -kv[1][0])[:12]:
        reasons = " ".join(f"{k}:{v / max(s, 1) * 100:.0f}%" for k, v in why.most_common(3))
        print(f"{ex:>10} {s / total * 100:5.1f}% {n:>6}  {reasons}")
    print("\ninstruction sites")
    for r in sorted(data, key=lambda r: -num(r, ism))[:top]:
        why = sorted(((num(r, i), h[i][6:]) for i in stalls), reverse=True)[:2]
        print(f"{r[ia][-6:]} {num(r, ism) / total * 100:5.1f}% ex={int(num(r, iex)):>8} {r[isrc][:64]:64s} "
              + " ".join(f"{k}:{v:.0f}" for v, k in why))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
