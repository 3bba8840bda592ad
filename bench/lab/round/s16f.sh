#!/usr/bin/env bash
# Session 16 round 6: where the sliding-window forward's time goes against causal's (sliding 445 TFLOP/s, causal 646 at
# B=2 H=16 S=8192 D=128): ncu --set full on one forward launch of each, details page as text.
. "$(dirname "$0")/lib.sh"
out_dir s16f; L=$O
deadline 280
build_gpu $O flexattn
for m in sliding_window:1023 causal; do
  $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D 128 --mask $m > /dev/null 2>&1
  timeout $(cap 120 10) ncu --set full -k regex:flexattn_fwd -c 1 --launch-skip 2 --page details --csv \
    $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D 128 --mask $m > $O/ncu_${m%%:*}.csv 2> $O/ncu_${m%%:*}.err
  echo "ncu $m rc=$? ($(el) s)"
done
for f in sliding_window causal; do
  python3 - $O/ncu_$f.csv <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = rows[0]
ix = {k: head.index(k) for k in ("Section Name", "Metric Name", "Metric Value") if k in head}
want = ("Duration", "Compute (SM) Throughput", "Memory Throughput", "Issue Slots Busy", "Executed Ipc Active",
        "No Eligible", "Eligible Warps Per Scheduler", "Active Warps Per Scheduler", "L2 Hit Rate", "DRAM Throughput")
for r in rows[1:]:
    if len(r) > max(ix.values()) and r[ix["Metric Name"]] in want:
        print(f"  {sys.argv[1].split('/')[-1]}: {r[ix['Metric Name']]} = {r[ix['Metric Value']]}")
PY
done
echo "total $(el) s"
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
