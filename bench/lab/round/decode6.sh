#!/usr/bin/env bash
# decode6 GPU check (issue 7, branch wip/s6-decode), ~95 s on an H200: the opt-in cluster merge
# (FLEXATTN_DECODE_CLUSTER=1: 2..8 kv splits of a row tile launched as one thread-block cluster, merged in
# the split kernel through distributed shared memory; no workspace, no combine kernel).
#  1. in parallel: gpu_decode_check, all cases, at the defaults and with FLEXATTN_DECODE_CLUSTER=1 (4 new
#     forced-split cases, 2 / 5 / 8 splits and 8 splits over 3 kv tiles; the check prints how many cases ran
#     merged in a cluster);
#  2. flexattn bench --suite decode: defaults, CLUSTER=1; 8x8k split sweeps 4..8 for both (the cluster
#     path takes 2..8 splits; 1x128k keeps its ~48 on the workspace path).
# The table prints last.
. "$(dirname "$0")/lib.sh"
out_dir decode6
deadline 95

(timeout 55 $DCHECK > "$O/check_default.log" 2> "$O/check_default.err"; echo $? > "$O/rc_default") &
(FLEXATTN_DECODE_CLUSTER=1 timeout 55 $DCHECK > "$O/check_cluster.log" 2> "$O/check_cluster.err"; echo $? > "$O/rc_cluster") &
wait
echo "checks done at $(el) s"

bench() { decode_bench "$1" 4 "${@:2}"; }  # name, max seconds, [VAR=value], flexattn bench arguments...
clok() { [ "$(cat "$O/rc_cluster" 2>/dev/null)" = 0 ]; }
# In priority order (each capped; the rest is skipped when the 95 s run out). The cluster benches run even
# when its check failed (a hang or a launch error shows up in their logs), after the default one.
bench default 8
bench cluster 8 FLEXATTN_DECODE_CLUSTER=1
bench cl_sweep8 6 FLEXATTN_DECODE_CLUSTER=1 --batch 8 --splits 0,4,5,6,7,8
bench sweep8 5 --batch 8 --splits 0,4,5,6,7,8
bench cluster2 8 FLEXATTN_DECODE_CLUSTER=1
echo "total $(el) s"

python3 - "$O" <<'PYEOF'
import re, sys
sys.path.insert(0, "bench/lab/round")
import decode_table
o = sys.argv[1]
def text(n):
    try:
        return open(f"{o}/check_{n}.log").read() + open(f"{o}/check_{n}.err").read()
    except OSError:
        return ""
def counts(n):
    t = text(n)
    if not t: return "missing"
    m = re.search(r"(\d+) cases, (\d+) failed", t)
    if m: return f"{int(m.group(1)) - int(m.group(2))}/{m.group(1)} pass"
    return f"incomplete ({len(re.findall(r'^PASS', t, re.M))} PASS, {len(re.findall(r'^FAIL', t, re.M))} FAIL)"
def merged(n):
    m = re.search(r"merged in a cluster \(no workspace\): (\d+)", text(n))
    return m.group(1) if m else "?"
def rows(n):
    return decode_table.rows(f"{o}/bench_{n}.log")
def first(n):
    return decode_table.first(f"{o}/bench_{n}.log")
print(f"check: default {counts('default')} (cluster-merged {merged('default')}) | "
      f"CLUSTER=1 {counts('cluster')} (cluster-merged {merged('cluster')})")
for n in ("default", "cluster"):
    fl = [l.strip()[:110] for l in text(n).splitlines() if l.startswith("FAIL")][:2]
    for f in fl: print(f"  FAIL ({n}): {f}")
shapes = decode_table.SHAPES
print(f"{'GB/s (auto)':<13}" + "".join(f"{n:>6}" for n in ["8x8k", "p16", "p128", "128k", "p16", "p128", "64x4k", "p16", "p128"]) + "  win ms")
for n, label in (("default", "default"), ("cluster", "CLUSTER=1"), ("cluster2", "CLUSTER=1 #2")):
    d = first(n)
    if not d: print(f"{label:<13} (no rows)"); continue
    w = d.get((1, 131072, 0, 4096))
    print(f"{label:<13}" + "".join(f"{d[k][0]:6.0f}" if k in d else "     -" for k in shapes) + (f"  {w[2]:.3f}" if w else ""))
    print(f"{'  b2b GB/s':<13}" + "".join(f"{d[k][0] * d[k][2] / d[k][3]:6.0f}" if k in d else "     -" for k in shapes))
    if n != "cluster2":
        print(f"{'  splits':<13}" + "".join(f"{d[k][1]:6d}" if k in d else "     -" for k in shapes))
def sweep(n, key, label):
    r = [(sp, gb, ms, b2b) for k, sp, ms, gb, b2b in rows(n) if k == key]
    if not r: print(f"{label}: (no rows)"); return
    print(f"{label}: " + " ".join(f"{sp}:{gb:.0f}/{gb * ms / b2b:.0f}" for sp, gb, ms, b2b in r) + "  (splits:GB/s per call/b2b)")
for n, lab in (("sweep8", "8x8k dflt "), ("cl_sweep8", "8x8k CLUST")):
    sweep(n, (8, 8192, 0, 0), lab)
    sweep(n, (8, 8192, 16, 0), lab + " p16")
PYEOF
