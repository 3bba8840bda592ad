#!/usr/bin/env bash
# Decode helper's GPU check (issue 7; branch wip/decode), ~100 s on an H200:
#  1. gpu_decode_check, all cases, defaults: the page ids read once per tile (paged), the one-tile-ahead
#     walk / page-table read, the latency-bound combine rewritten, the cached host launch path;
#  2. gpu_decode_check --quick with FLEXATTN_DECODE_STAGES=3 + FLEXATTN_DECODE_PDL=1, and with STAGES=4
#     (the deeper ring and the programmatic dependent combine; also compiles their kernels for step 3);
#  3. flexattn bench --suite decode per config (defaults, PDL, 3 / 4 stages, wave tolerance 1), each shape
#     at the heuristic's split count and at 8..128 splits (--splits; one process per config).
# Prints a table last: pass counts, then GB/s of K+V per shape (auto splits) and the best split found.
set -u
cd "$(dirname "$0")/../../.."
O=${OUT:-/tmp}/decode
mkdir -p "$O"
export FLEXATTN_CACHE_DIR=$PWD/build-gpu/kernel-cache
CHECK=build-gpu/tests/gpu/decode/gpu_decode_check
B=build-gpu/tools/flexattn
T0=$(date +%s)
left() { echo $((100 - ($(date +%s) - T0))); }

timeout 45 $CHECK > "$O/check_default.log" 2> "$O/check_default.err"
echo "check default rc=$?"
FLEXATTN_DECODE_STAGES=3 FLEXATTN_DECODE_PDL=1 timeout 20 $CHECK --quick > "$O/check_s3_pdl.log" 2> "$O/check_s3_pdl.err"
echo "check stages=3 pdl rc=$?"
FLEXATTN_DECODE_STAGES=4 timeout 15 $CHECK --quick > "$O/check_s4.log" 2> "$O/check_s4.err"
echo "check stages=4 rc=$?"

SPLITS=0,1,2,4,8,16,32,48,64,96,128
run_bench() {  # name, env...
  local name=$1; shift
  local t=$(left)
  if [ "$t" -lt 6 ]; then echo "bench $name skipped (time)"; return; fi
  [ "$t" -gt 12 ] && t=12
  env "$@" timeout $t $B bench --suite decode --backend cuda --splits $SPLITS > "$O/bench_$name.log" 2>&1
  echo "bench $name rc=$?"
}
run_bench default FLEXATTN_DECODE_PDL=0
run_bench pdl FLEXATTN_DECODE_PDL=1
run_bench s3_pdl FLEXATTN_DECODE_STAGES=3 FLEXATTN_DECODE_PDL=1
run_bench s4_pdl FLEXATTN_DECODE_STAGES=4 FLEXATTN_DECODE_PDL=1
run_bench wave1_pdl FLEXATTN_DECODE_WAVE=1 FLEXATTN_DECODE_PDL=1
echo "total $(( $(date +%s) - T0 )) s"

python3 - "$O" <<'EOF'
import os, re, sys
o = sys.argv[1]
def counts(f):
    try:
        t = open(os.path.join(o, f)).read() + open(os.path.join(o, f.replace(".log", ".err"))).read()
    except OSError:
        return "missing"
    m = re.search(r"(\d+) cases, (\d+) failed", t)
    if m:
        return f"{int(m.group(1)) - int(m.group(2))}/{m.group(1)} pass"
    return f"incomplete ({len(re.findall(r'^PASS', t, re.M))} PASS lines)"
print(f"check: default {counts('check_default.log')} | s3+pdl quick {counts('check_s3_pdl.log')} | s4 quick {counts('check_s4.log')}")
shapes = [(8, 8192, 0), (8, 8192, 16), (8, 8192, 128), (1, 131072, 0), (1, 131072, 16), (1, 131072, 128),
          (64, 4096, 0), (64, 4096, 16), (64, 4096, 128)]
names = ["8x8k", "p16", "p128", "1x128k", "p16", "p128", "64x4k", "p16", "p128"]
print("GB/s auto      " + " ".join(f"{n:>6}" for n in names) + "  win ms")
print("before(main)     3121   2478   2478   3308   2415   2415   3663   2595   2595")
best = {}
for cfg in ["default", "pdl", "s3_pdl", "s4_pdl", "wave1_pdl"]:
    try:
        lines = open(os.path.join(o, f"bench_{cfg}.log")).read().splitlines()
    except OSError:
        continue
    auto, win, seen = {}, "-", set()
    for ln in lines:
        f = ln.split()
        if len(f) != 7 or not f[0].isdigit():
            continue
        key = (int(f[0]), int(f[1]), int(f[2]))
        w, sp, ms, gb = int(f[3]), int(f[4]), float(f[5]), float(f[6])
        if w:
            if win == "-": win = f"{ms:.4f}"
            continue
        if key not in seen:
            seen.add(key); auto[key] = (gb, sp)
        if gb > best.get(key, (0,))[0]:
            best[key] = (gb, sp, cfg)
    print(f"{cfg:<14} " + " ".join(f"{auto[k][0]:6.0f}" if k in auto else "     -" for k in shapes) + f"  {win}")
    print(f"{'  splits':<14} " + " ".join(f"{auto[k][1]:6d}" if k in auto else "     -" for k in shapes))
print("best (GB/s@splits/config):")
for i in range(0, 9, 3):
    print("  " + "  ".join(f"{names[j]} {best[shapes[j]][0]:.0f}@{best[shapes[j]][1]}/{best[shapes[j]][2]}"
                           if shapes[j] in best else f"{names[j]} -" for j in range(i, i + 3)))
EOF
