#!/usr/bin/env python3
"""Reads `ncu --import R --page source --csv --print-source sass` output and prints where the warp-stall samples
of the kernel fall: per opcode (first word of the SASS) and the top instructions with their neighbourhood.
Usage: ncu_sass_top.py FILE.csv [TOP]"""
import collections
import csv
import sys


def main():
    path, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25
    rows = list(csv.reader(open(path, newline="", errors="replace")))
    hi = next(i for i, r in enumerate(rows) if any("Source" == c.strip() or "Sampling" in c for c in r))
    head = rows[hi]
    src = next(i for i, c in enumerate(head) if c.strip() == "Source")
    samp = [i for i, c in enumerate(head) if "Warp Stall Sampling (All" in c]
    samp = samp[0] if samp else next(i for i, c in enumerate(head) if "Sampling" in c)
    reasons = [i for i, c in enumerate(head) if c.startswith("stall_") or "Stall" in c and i != samp]
    body = [r for r in rows[hi + 1:] if len(r) > samp]

    def num(x):
        try:
            return float(x.replace(",", ""))
        except ValueError:
            return 0.0
    total = sum(num(r[samp]) for r in body) or 1.0
    by_op = collections.Counter()
    for r in body:
        op = r[src].strip().split()
        op = op[0] if op and not op[0].startswith("@") else (op[1] if len(op) > 1 else "?")
        by_op[op.split(".")[0]] += num(r[samp])
    print(f"{path}: {len(body)} instructions, {total:.0f} samples; column '{head[samp]}'")
    for op, v in by_op.most_common(15):
        print(f"  {op:12s} {100 * v / total:5.1f} %")
    order = sorted(range(len(body)), key=lambda i: -num(body[i][samp]))[:top]
    for i in order:
        r = body[i]
        why = sorted(((num(r[j]), head[j]) for j in reasons if num(r[j]) > 0), reverse=True)[:3]
        print(f"  #{i:5d} {100 * num(r[samp]) / total:5.2f} %  {r[src].strip()[:60]:60s} " +
              ", ".join(f"{n.replace('stall_', '')[:28]} {v:.0f}" for v, n in why))


if __name__ == "__main__":
    main()
