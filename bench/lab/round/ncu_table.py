"""The metrics of an `ncu --csv` log (argv[1]), one line each: '  <name> = <value> <unit>'. With more arguments, only
those metric names, first occurrence each, in the log's order (`--set full` repeats some across sections)."""
import csv
import sys

rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
head = next((r for r in rows if "Metric Name" in r), None)
if head is None:
    sys.exit(print("  no ncu table"))
ix = {k: head.index(k) for k in ("Metric Name", "Metric Value", "Metric Unit")}
want = set(sys.argv[2:])
seen = set()
for r in rows[rows.index(head) + 1:]:
    n = r[ix["Metric Name"]]
    if (not want or n in want) and n not in seen:
        seen.add(n)
        print(f"  {n} = {r[ix['Metric Value']]} {r[ix['Metric Unit']]}")
