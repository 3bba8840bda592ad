#!/usr/bin/env bash
# Session 45: the decode TMA ring's opt-ins side by side, then a decode record with the best of them (issue 7).
# The suite's times fit t = 17 us + bytes / 4.23 TB/s (H200 s44b: 1x128k, 64x4k) against cuDNN's 21 us + bytes /
# 4.55 TB/s, so 8x8k needs a faster steady rate for 3.5 TB/s. Candidates (decode runs, tokens of S45A_ORDER):
#   16  16-row boxes (FLEXATTN_DECODE_TMA_BOX=16): a split's last tile stops within 15 rows of its end (s44b ncu:
#       275.4 MB from DRAM for 268.5 with 64-row boxes). Predicted +1-2 %.
#   64  the default (64-row boxes).
#   e16 16-row boxes, K / V loads at L2 evict_first (FLEXATTN_DECODE_EVICT_FIRST=1): the ~50 MB of dirty lines the
#       benchmark's flush leaves in L2 stay there instead of being written back during the step. Predicted 8x8k up
#       to +10 % (the write-back is ~12 us of DRAM time), less on the longer shapes.
#   w16 16-row boxes of whole rows (FLEXATTN_DECODE_TMA_WHOLE=1): one contiguous block per box. Predicted +0-5 %.
#   p16 16-row boxes, L2 promotion 256 B (FLEXATTN_DECODE_TMA_L2=256). Predicted +0-3 %.
#   ew16 whole rows and evict_first together (the letters combine).
#   E16 evict_first also for the paged rows (FLEXATTN_DECODE_EVICT_FIRST=2: pages taken as unshared; e keeps them at
#       evict_normal at B > 1), so paged 8x8k keeps within 10 % of a faster contiguous 8x8k.
# gpu_decode_check first with 16-row boxes alone and with whole rows + evict_first 2 (every kernel change of the
# session; the L2 hints cannot change results). The winner: the token with the best mean 8x8k GB/s whose other
# flexattn rows hold 98 % of the default's; then `bench/run.py --suite decode` (every impl) with it into
# $OUT/bench/decode (meta.env names the switches). Record here: python3 bench/run.py --record DIR/bench/decode.
. "$(dirname "$0")/lib.sh"
out_dir s45a; L=$O
deadline ${S45A_DEADLINE:-520}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C gpu_decode_check
python_env
dchecks ${S45A_CHECK_CAP:-90} box16:FLEXATTN_DECODE_TMA_BOX=16,FLEXATTN_JIT_DEBUG=1 \
  whole:FLEXATTN_DECODE_TMA_BOX=16,FLEXATTN_DECODE_TMA_WHOLE=1,FLEXATTN_DECODE_EVICT_FIRST=2
echo "tma fallbacks: $(grep -c 'not TMA' $O/dcheck_box16.log) ($(grep 'not TMA' $O/dcheck_box16.log | sort | uniq -c | head -3))"
token_env() {  # the switches of a token
  local c=$1
  echo FLEXATTN_DECODE_TMA_BOX=${c//[a-zA-Z]/} FLEXATTN_DECODE_TMA_WHOLE=$([[ $c == *w* ]] && echo 1 || echo 0) \
    FLEXATTN_DECODE_TMA_L2=$([[ $c == *p* ]] && echo 256 || echo 128) FLEXATTN_DECODE_EVICT_FIRST=$([[ $c == *E* ]] && echo 2 || ([[ $c == *e* ]] && echo 1 || echo 0))
}
n=0
for c in ${S45A_ORDER:-64 16 e16 w16 E16 ew16 64 16}; do
  [ $(left) -gt 100 ] || break
  decode_run decode_${n}_$c 40 $(token_env $c)
  n=$((n + 1))
done
# A dcheck failure bars its candidates: box16 every 16-row token; whole (with evict_first 2) the w, e and E tokens.
bad=""
grep -q '^FAIL' $O/dcheck_box16.log && bad="16 e16 E16 w16 ew16 Ew16 p16"
grep -q '^FAIL' $O/dcheck_whole.log && bad="$bad w16 e16 E16 ew16 Ew16"
best=$(python3 - "$O" "$bad" <<'PY'
import glob, json, os, sys
from collections import defaultdict
out, bad = sys.argv[1], sys.argv[2].split()
runs = defaultdict(list)  # token -> [{(B, S, page, window): GBps}]
for d in sorted(glob.glob(os.path.join(out, "decode_*_*"))):
    f = os.path.join(d, "results.json")
    if not os.path.isdir(d) or not os.path.exists(f):
        continue
    rows = json.load(open(f)).get("decode_rows") or []
    runs[os.path.basename(d).split("_", 2)[2]].append(
        {(r["B"], r["S"], r["page"], r["window"]): r["GBps"] for r in rows if r["impl"] == "flexattn" and r.get("GBps")})
mean = {t: {k: sum(r.get(k, 0) for r in rs) / len(rs) for k in rs[0]} for t, rs in runs.items()}
base = mean.get("64", {})
key = (8, 8192, 0, 0)
for t, m in sorted(mean.items()):
    print(f"{t:4s} runs {len(runs[t])} 8x8k {m.get(key, 0):6.0f}  others/default " +
          " ".join(f"{m.get(k, 0) / base[k]:.3f}" for k in sorted(base) if k != key), file=sys.stderr)
ok = [t for t, m in mean.items() if t not in bad and all(m.get(k, 0) >= 0.98 * v for k, v in base.items() if k != key)]
print(max(ok, key=lambda t: mean[t].get(key, 0)) if ok else "64")
PY
)
echo "winner: $best (barred: ${bad:-none}) ($(el) s)"
mkdir -p $OUT/bench
env $(token_env $best) timeout $(cap 100 30) python3 bench/run.py --suite decode --out $OUT/bench/decode > $OUT/bench/decode.log 2>&1
echo "record decode ($best) rc=$? ($(el) s)"; grep -E "^\| (flexattn|sdpa-cudnn|torch-flex)" $OUT/bench/decode.log | head -16
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
