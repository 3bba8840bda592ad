"""Top SASS lines of an ncu source page (`ncu --import R --page source --csv --print-source sass`) by warp stall samples:
python3 ncu_top.py CSV [N]. Prints each line's share of all samples, its not-issued samples and its instruction."""
import csv
import sys

lines = open(sys.argv[1], newline="", errors="replace").read().splitlines()
start = next((i for i, l in enumerate(lines) if l.startswith('"Address"')), 0)  # after the "Kernel Name" line
rows = list(csv.DictReader(lines[start:]))
n = int(sys.argv[2]) if len(sys.argv) > 2 else 25
if not rows:
    sys.exit("no rows")
cols = list(rows[0].keys())
allc = next((c for c in cols if c.startswith("Warp Stall Sampling (All")), None)
notc = next((c for c in cols if c.startswith("Warp Stall Sampling (Not")), None)
srcc = next((c for c in cols if c in ("Source", "Sass", "SASS")), cols[1])
if allc is None:
    sys.exit(f"no stall column in {cols[:12]}")


def num(x):
    try:
        return float(str(x).replace(",", ""))
    except ValueError:
        return 0.0


total = sum(num(r[allc]) for r in rows) or 1.0
print(f"{len(rows)} SASS lines, {total:.0f} samples")
for i, r in sorted(enumerate(rows), key=lambda ir: -num(ir[1][allc]))[:n]:
    print(f"{i:6d} {100 * num(r[allc]) / total:5.1f}% notiss {num(r[notc]) if notc else 0:7.0f}  {r[srcc][:90]}")
