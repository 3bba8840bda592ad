#!/usr/bin/env bash
# decode5 GPU check (issue 7, branch wip/decode5), ~95 s on an H200:
#  1. gpu_decode_check, all cases, at the defaults (the host path trimmed: no allocation in the view checks,
#     one kernel-set / launch-state lookup per call; the prefetch helper refactor is SASS-identical);
#     at the same time `--quick` with FLEXATTN_DECODE_STAGES=3 (checks and compiles that ring for step 2d);
#  2. flexattn bench --suite decode: (a) defaults; (b) FLEXATTN_DECODE_WAVE=0.95 (candidate heuristic:
#     1x128k 43 -> 48 splits, 64x4k 2 -> 3, 8x8k stays 6); (c) 8x8k split sweep 3..24; (d) 8x8k with a
#     3-stage bulk ring (2 CTAs/SM); (e) --shuffle (random page tables, as bench/run.py's); (f) 1x128k and
#     (g) 64x4k sweeps around the candidates.
# "before" = session 4's defaults on the H200 (same binary path, bench/RESULTS.md); the table prints last.
set -u
cd "$(dirname "$0")/../../.."
O=${OUT:-/tmp}/decode5
mkdir -p "$O"
export FLEXATTN_CACHE_DIR=$PWD/build-gpu/kernel-cache
CHECK=build-gpu/tests/gpu/decode/gpu_decode_check
B=build-gpu/tools/flexattn
T0=$(date +%s)
left() { echo $((95 - ($(date +%s) - T0))); }

timeout 50 $CHECK > "$O/check_default.log" 2> "$O/check_default.err"; echo $? > "$O/rc_default" &
FLEXATTN_DECODE_STAGES=3 timeout 45 $CHECK --quick > "$O/check_s3.log" 2> "$O/check_s3.err"; echo $? > "$O/rc_s3" &
wait
echo "checks done at $(( $(date +%s) - T0 )) s"

bench() {  # name, max seconds, env / args...
  local name=$1 cap=$2; shift 2
  local t=$(left)
  if [ "$t" -lt 4 ]; then echo "bench $name skipped (time)"; return; fi
  [ "$t" -gt "$cap" ] && t=$cap
  env "$@" > "$O/bench_$name.log" 2>&1
  echo "bench $name rc=$?"
}
bench default 9 timeout 9 $B bench --suite decode --backend cuda
bench sweep8 6 timeout 6 $B bench --suite decode --backend cuda --batch 8 --splits 0,3,4,5,6,7,8,9,10,11,12,14,16,18,24
bench wave95 9 FLEXATTN_DECODE_WAVE=0.95 timeout 9 $B bench --suite decode --backend cuda
bench s3_8 6 FLEXATTN_DECODE_STAGES=3 timeout 6 $B bench --suite decode --backend cuda --batch 8 --splits 0,3,4,5,6,8,12
bench shuffle 9 timeout 9 $B bench --suite decode --backend cuda --shuffle
bench sweep1 6 timeout 6 $B bench --suite decode --backend cuda --batch 1 --splits 0,40,44,46,48,50,52,56,64
bench sweep64 7 timeout 7 $B bench --suite decode --backend cuda --batch 64 --splits 0,2,3,4
echo "total $(( $(date +%s) - T0 )) s"

python3 - "$O" <<'PYEOF'
import os, re, sys
o = sys.argv[1]
def counts(n):
    try:
        t = open(f"{o}/check_{n}.log").read() + open(f"{o}/check_{n}.err").read()
    except OSError:
        return "missing"
    m = re.search(r"(\d+) cases, (\d+) failed", t)
    if m:
        return f"{int(m.group(1)) - int(m.group(2))}/{m.group(1)} pass"
    return f"incomplete ({len(re.findall(r'PASS', t))} PASS, {len(re.findall(r'FAIL', t))} FAIL)"
def rows(n):
    r = []
    try:
        for ln in open(f"{o}/bench_{n}.log"):
            f = ln.split()
            if len(f) == 8 and f[0].isdigit():
                r.append(((int(f[0]), int(f[1]), int(f[2]), int(f[3])), int(f[4]), float(f[5]), float(f[6]), float(f[7])))
    except OSError:
        pass
    return r
def first(n):  # the first row per shape (auto splits unless the sweep's first entry says otherwise)
    d = {}
    for k, sp, ms, gb, b2b in rows(n):
        d.setdefault(k, (gb, sp, ms, b2b))
    return d
print(f"check: default (all) {counts('default')} | stages=3 --quick {counts('s3')}")
for n in ("default", "s3"):
    try:
        fl = [l.strip()[:110] for l in open(f"{o}/check_{n}.err") if l.startswith("FAIL")][:1]
        fl += [l.strip()[:110] for l in open(f"{o}/check_{n}.log") if "FAIL" in l][:1]
        if fl: print(f"  first FAIL ({n}): {fl[0]}")
    except OSError:
        pass
shapes = [(8, 8192, 0, 0), (8, 8192, 16, 0), (8, 8192, 128, 0), (1, 131072, 0, 0), (1, 131072, 16, 0),
          (1, 131072, 128, 0), (64, 4096, 0, 0), (64, 4096, 16, 0), (64, 4096, 128, 0)]
print(f"{'GB/s (auto)':<12}" + "".join(f"{n:>6}" for n in ["8x8k", "p16", "p128", "128k", "p16", "p128", "64x4k", "p16", "p128"]) + "  win ms")
print(f"{'before(s4)':<12}  3407  3304  3287  3641  3500  3516  3767  3732  3743  0.025")
for n, label in (("default", "after"), ("wave95", "WAVE=0.95"), ("shuffle", "shuffled pg")):
    d = first(n)
    if not d: print(f"{label:<12} (no rows)"); continue
    w = d.get((1, 131072, 0, 4096))
    print(f"{label:<12}" + "".join(f"{d[k][0]:6.0f}" if k in d else "     -" for k in shapes) + (f"  {w[2]:.3f}" if w else ""))
    if n == "default":
        print(f"{'  b2b GB/s':<12}" + "".join(f"{d[k][0] * d[k][2] / d[k][3]:6.0f}" if k in d else "     -" for k in shapes))
        print(f"{'  splits':<12}" + "".join(f"{d[k][1]:6d}" if k in d else "     -" for k in shapes))
    if n == "wave95":
        print(f"{'  splits':<12}" + "".join(f"{d[k][1]:6d}" if k in d else "     -" for k in shapes))
def sweep(n, key, label):
    r = [(sp, gb, ms, b2b) for k, sp, ms, gb, b2b in rows(n) if k == key]
    if not r: print(f"{label}: (no rows)"); return
    best = max(r, key=lambda x: x[1])
    print(f"{label}: auto {r[0][0]}={r[0][1]:.0f}; " + " ".join(f"{sp}:{gb:.0f}" for sp, gb, _, _ in r[1:])
          + f" | best {best[0]}={best[1]:.0f}")
sweep("sweep8", (8, 8192, 0, 0), "8x8k")
sweep("sweep8", (8, 8192, 16, 0), "8x8k p16")
sweep("s3_8", (8, 8192, 0, 0), "8x8k stages3")
sweep("sweep1", (1, 131072, 0, 0), "1x128k")
sweep("sweep64", (64, 4096, 0, 0), "64x4k")
PYEOF
