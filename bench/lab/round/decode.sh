#!/usr/bin/env bash
# Decode helper's GPU check (issue 7; branch wip/decode), ~100 s on an H200:
#  1. gpu_decode_check, all cases, defaults: page ids once per tile (paged), the walk / page-table read a
#     tile ahead, the latency-bound combine rewritten, the cached host launch path;
#  2. at the same time, gpu_decode_check --quick for the opt-in paths (which also compiles the kernels
#     step 3 times): FLEXATTN_DECODE_BULK=1 (cp.async.bulk row copies on mbarriers, sm_90a) with PDL (the
#     combine as a programmatic dependent launch), bulk + L2 prefetch (PREFETCH=2: a tile past the
#     ring, 2 stages; =1 with 3 stages), the cp.async ring with 3 stages, and with PREFETCH=2;
#  3. flexattn bench --suite decode per config, each shape at the heuristic's split count and at 1..128
#     splits (--splits; one process per config; the order is the priority if time runs short).
# Prints a table last: pass counts, GB/s of K+V per shape (auto splits) per config, the best split found.
. "$(dirname "$0")/lib.sh"
out_dir decode
deadline 100

# Correctness runs in parallel (GPU time is not what they measure; their NVRTC compiles share the
# 16 cores and the kernel cache): all cases at the defaults, --quick for each opt-in configuration.
quick() {  # name, env...
  local name=$1; shift
  env "$@" timeout 50 $DCHECK --quick > "$O/check_$name.log" 2> "$O/check_$name.err"
  local rc=$?
  echo $rc > "$O/rc_$name"
  echo "check $name rc=$rc"
}
timeout 60 $DCHECK > "$O/check_default.log" 2> "$O/check_default.err" && echo "check default rc=0" || echo "check default rc=$?" &
quick bulk_pdl FLEXATTN_DECODE_BULK=1 FLEXATTN_DECODE_PDL=1 &
quick bulk_pf2_pdl FLEXATTN_DECODE_BULK=1 FLEXATTN_DECODE_PREFETCH=2 FLEXATTN_DECODE_PDL=1 &
quick bulk_pf1_s3_pdl FLEXATTN_DECODE_BULK=1 FLEXATTN_DECODE_PREFETCH=1 FLEXATTN_DECODE_STAGES=3 FLEXATTN_DECODE_PDL=1 &
quick s3_pdl FLEXATTN_DECODE_STAGES=3 FLEXATTN_DECODE_PDL=1 &
quick pf2_pdl FLEXATTN_DECODE_PREFETCH=2 FLEXATTN_DECODE_PDL=1 &
wait
echo "checks done at $(el) s"

SPLITS=0,1,2,4,8,16,32,48,64,96,128
run_bench() {  # name, the quick check it needs (- none), env...
  local name=$1 needs=$2; shift 2
  if [ "$needs" != - ] && [ "$(cat "$O/rc_$needs" 2>/dev/null)" != 0 ]; then
    echo "bench $name skipped (check $needs did not pass)"; return
  fi
  decode_bench $name 5 12 "$@" --splits $SPLITS
}
run_bench default - FLEXATTN_DECODE_PDL=0
run_bench pdl - FLEXATTN_DECODE_PDL=1
run_bench bulk_pdl bulk_pdl FLEXATTN_DECODE_BULK=1 FLEXATTN_DECODE_PDL=1
run_bench bulk_pf2_pdl bulk_pf2_pdl FLEXATTN_DECODE_BULK=1 FLEXATTN_DECODE_PREFETCH=2 FLEXATTN_DECODE_PDL=1
run_bench s3_pdl s3_pdl FLEXATTN_DECODE_STAGES=3 FLEXATTN_DECODE_PDL=1
run_bench pf2_pdl pf2_pdl FLEXATTN_DECODE_PREFETCH=2 FLEXATTN_DECODE_PDL=1
run_bench bulk_pf1_s3_pdl bulk_pf1_s3_pdl FLEXATTN_DECODE_BULK=1 FLEXATTN_DECODE_PREFETCH=1 FLEXATTN_DECODE_STAGES=3 FLEXATTN_DECODE_PDL=1
run_bench bulk_pf1_pdl bulk_pf2_pdl FLEXATTN_DECODE_BULK=1 FLEXATTN_DECODE_PREFETCH=1 FLEXATTN_DECODE_PDL=1
echo "total $(el) s"

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
cfgs = ["default", "bulk_pdl", "bulk_pf2_pdl", "bulk_pf1_s3_pdl", "s3_pdl", "pf2_pdl"]
print("check: " + " | ".join(f"{n} {counts('check_' + n + '.log')}" for n in cfgs[:3]))
print("check: " + " | ".join(f"{n} {counts('check_' + n + '.log')}" for n in cfgs[3:]))
fails = []
for n in cfgs:
    try:
        fails += [f"{n}: {ln[:100]}" for ln in open(os.path.join(o, f"check_{n}.err")) if ln.startswith("FAIL")][:1]
    except OSError:
        pass
if fails:
    print("first FAIL " + " || ".join(fails)[:300])
shapes = [(8, 8192, 0), (8, 8192, 16), (8, 8192, 128), (1, 131072, 0), (1, 131072, 16), (1, 131072, 128),
          (64, 4096, 0), (64, 4096, 16), (64, 4096, 128)]
names = ["8x8k", "p16", "p128", "1x128k", "p16", "p128", "64x4k", "p16", "p128"]
print(f"{'GB/s auto':<16}" + " ".join(f"{n:>6}" for n in names) + "  win ms")
print("before(main)      3121   2478   2478   3308   2415   2415   3663   2595   2595  0.0254")
best, auto_splits = {}, None
for cfg in ["default", "pdl", "bulk_pdl", "bulk_pf2_pdl", "s3_pdl", "pf2_pdl", "bulk_pf1_s3_pdl", "bulk_pf1_pdl"]:
    try:
        lines = open(os.path.join(o, f"bench_{cfg}.log")).read().splitlines()
    except OSError:
        continue
    auto, win, seen = {}, "-", set()
    for ln in lines:
        f = ln.split()
        if len(f) != 8 or not f[0].isdigit():
            continue
        key = (int(f[0]), int(f[1]), int(f[2]))
        w, sp, ms, gb, b2b = int(f[3]), int(f[4]), float(f[5]), float(f[6]), float(f[7])
        if w:
            if win == "-": win = f"{ms:.4f}"
            continue
        if key not in seen:
            seen.add(key); auto[key] = (gb, sp, gb * ms / b2b)
        if gb > best.get(key, (0,))[0]:
            best[key] = (gb, sp, cfg)
    if auto_splits is None:
        auto_splits = auto
    print(f"{cfg:<16}" + " ".join(f"{auto[k][0]:6.0f}" if k in auto else "     -" for k in shapes) + f"  {win}")
if auto_splits:
    print(f"{'auto splits':<16}" + " ".join(f"{auto_splits[k][1]:6d}" if k in auto_splits else "     -" for k in shapes))
    print(f"{'default b2b':<16}" + " ".join(f"{auto_splits[k][2]:6.0f}" if k in auto_splits else "     -" for k in shapes)
          + "  (GB/s of 20 calls back to back: GPU time only)")
print("best (GB/s@splits/config):")
for i in range(0, 9, 3):
    print("  " + "  ".join(f"{names[j]} {best[shapes[j]][0]:.0f}@{best[shapes[j]][1]}/{best[shapes[j]][2]}"
                           if shapes[j] in best else f"{names[j]} -" for j in range(i, i + 3)))
EOF
