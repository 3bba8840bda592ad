#!/usr/bin/env bash
# decode5 GPU check (issue 7, branch wip/decode5), ~95 s on an H200:
#  1. in parallel: gpu_decode_check, all cases, at the defaults (the host path trimmed: no allocation in
#     the view checks, one kernel-set / launch-state lookup per call; the prefetch helper refactor is
#     SASS-identical), all cases with FLEXATTN_DECODE_COMBINE_BATCH=1 (the combine's partial loads in
#     chunks of 16: one L2 round trip per chunk instead of one per split below 8 splits / per remainder
#     split), and `--quick` with FLEXATTN_DECODE_STAGES=3 (also compiles that ring for step 2);
#  2. flexattn bench --suite decode: defaults, COMBINE_BATCH=1; 8x8k split sweeps (3..24) for both;
#     8x8k with a 3-stage bulk ring (2 CTAs/SM); --shuffle (random page tables, as bench/run.py's) on
#     8x8k; 1x128k and 64x4k sweeps around the candidate heuristic FLEXATTN_DECODE_WAVE=0.95 (1x128k 43 ->
#     48 splits, 64x4k 2 -> 3, 8x8k stays 6: its effect is read off the sweeps).
# "before" = session 4's defaults on the H200 (same binary path, bench/RESULTS.md); the table prints last.
. "$(dirname "$0")/lib.sh"
out_dir decode5
deadline 95

(timeout 54 $DCHECK > "$O/check_default.log" 2> "$O/check_default.err"; echo $? > "$O/rc_default") &
(FLEXATTN_DECODE_COMBINE_BATCH=1 timeout 54 $DCHECK > "$O/check_cb.log" 2> "$O/check_cb.err"; echo $? > "$O/rc_cb") &
(FLEXATTN_DECODE_STAGES=3 timeout 50 $DCHECK --quick > "$O/check_s3.log" 2> "$O/check_s3.err"; echo $? > "$O/rc_s3") &
wait
echo "checks done at $(el) s"

bench() { decode_bench "$1" 4 "${@:2}"; }  # name, max seconds, [VAR=value], flexattn bench arguments...
cbok() { [ "$(cat "$O/rc_cb" 2>/dev/null)" = 0 ]; }
# In priority order (each capped; the rest is skipped when the 95 s run out).
bench default 7
cbok && bench cb 7 FLEXATTN_DECODE_COMBINE_BATCH=1
bench sweep8 5 --batch 8 --splits 0,3,4,5,6,7,8,10,12,16,24
cbok && bench cb_sweep8 4 FLEXATTN_DECODE_COMBINE_BATCH=1 --batch 8 --splits 0,4,5,6,8,12,16
bench shuffle 4 --shuffle --batch 8
bench sweep1 5 --batch 1 --splits 0,40,44,48,52,56,64
bench sweep64 5 --batch 64 --splits 0,2,3
bench s3_8 6 FLEXATTN_DECODE_STAGES=3 --batch 8 --splits 0,3,4,6,8,12
echo "total $(el) s"

python3 - "$O" <<'PYEOF'
import os, re, sys
sys.path.insert(0, "bench/lab/round")
import decode_table
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
    return decode_table.rows(f"{o}/bench_{n}.log")
def first(n):
    return decode_table.first(f"{o}/bench_{n}.log")
print(f"check: default {counts('default')} | COMBINE_BATCH=1 {counts('cb')} | STAGES=3 --quick {counts('s3')}")
for n in ("default", "cb", "s3"):
    try:
        fl = [l.strip()[:110] for l in open(f"{o}/check_{n}.err") if l.startswith("FAIL")][:1]
        fl += [l.strip()[:110] for l in open(f"{o}/check_{n}.log") if "FAIL" in l][:1]
        if fl: print(f"  first FAIL ({n}): {fl[0]}")
    except OSError:
        pass
shapes = decode_table.SHAPES
print(f"{'GB/s (auto)':<12}" + "".join(f"{n:>6}" for n in ["8x8k", "p16", "p128", "128k", "p16", "p128", "64x4k", "p16", "p128"]) + "  win ms")
print(f"{'before(s4)':<12}  3407  3304  3287  3641  3500  3516  3767  3732  3743  0.025")
for n, label in (("default", "after"), ("cb", "COMB_BATCH"), ("shuffle", "shuffled pg")):
    d = first(n)
    if not d: print(f"{label:<12} (no rows)"); continue
    w = d.get((1, 131072, 0, 4096))
    print(f"{label:<12}" + "".join(f"{d[k][0]:6.0f}" if k in d else "     -" for k in shapes) + (f"  {w[2]:.3f}" if w else ""))
    if n in ("default", "cb"):
        print(f"{'  b2b GB/s':<12}" + "".join(f"{d[k][0] * d[k][2] / d[k][3]:6.0f}" if k in d else "     -" for k in shapes))
    if n == "default":
        print(f"{'  splits':<12}" + "".join(f"{d[k][1]:6d}" if k in d else "     -" for k in shapes))
def sweep(n, key, label):
    r = [(sp, gb, ms, b2b) for k, sp, ms, gb, b2b in rows(n) if k == key]
    if not r: print(f"{label}: (no rows)"); return
    best = max(r, key=lambda x: x[1])
    print(f"{label}: auto {r[0][0]}={r[0][1]:.0f}; " + " ".join(f"{sp}:{gb:.0f}" for sp, gb, _, _ in r[1:])
          + f" | best {best[0]}={best[1]:.0f}")
sweep("sweep8", (8, 8192, 0, 0), "8x8k")
sweep("sweep8", (8, 8192, 16, 0), "8x8k p16")
sweep("cb_sweep8", (8, 8192, 0, 0), "8x8k COMB_B")
sweep("s3_8", (8, 8192, 0, 0), "8x8k stages3")
sweep("sweep1", (1, 131072, 0, 0), "1x128k")
sweep("sweep64", (64, 4096, 0, 0), "64x4k")
PYEOF
