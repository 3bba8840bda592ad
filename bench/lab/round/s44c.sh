#!/usr/bin/env bash
# Session 44/45: TMA tiles (default since s44b) loaded in 16-row boxes (FLEXATTN_DECODE_TMA_BOX=16, opt-in) against
# s44b's 64-row boxes, which read up to 63 rows past each split (ncu 8x8k: 275.4 MB from DRAM for 268.5). Predicted:
# ~269 MB and 8x8k +1-2 % (s44b: 3298 GB/s, cuDNN 3362). Session 45 adds whole-row boxes (FLEXATTN_DECODE_TMA_WHOLE=1:
# one contiguous block of K or V per box instead of two half-row boxes at D = 128; predicted: if DRAM row locality is
# what holds the steady rate at ~4.2 TB/s against cuDNN's ~4.5, +3-7 % on every shape). gpu_decode_check with box 16,
# box 64 and whole rows (box 16) side by side, the decode suite per S44C_ORDER (16 64 w16 w64: box rows, w = whole),
# (p: box 16 with the maps' L2 promotion at 256 bytes, FLEXATTN_DECODE_TMA_L2: the second half-row box then
# hits L2; e: box 16 with K / V loads at L2 evict_first, FLEXATTN_DECODE_EVICT_FIRST: the ~50 MB of dirty lines the
# benchmark's flush leaves in L2 need not be written back during the step), a split sweep at 8x8k, the combine kernel instead of the merge at 8x8k, ncu of 8x8k (box 16) and 1x128k.
. "$(dirname "$0")/lib.sh"
out_dir s44c; L=$O
deadline ${S44C_DEADLINE:-250}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C gpu_decode_check
python_env
dchecks ${S44C_CHECK_CAP:-95} box16:FLEXATTN_DECODE_TMA_BOX=16,FLEXATTN_JIT_DEBUG=1 box64:FLEXATTN_DECODE_TMA_BOX=64 \
  whole:FLEXATTN_DECODE_TMA_BOX=16,FLEXATTN_DECODE_TMA_WHOLE=1,FLEXATTN_DECODE_EVICT_FIRST=1
echo "tma fallbacks: $(grep -c 'not TMA' $O/dcheck_box16.log) ($(grep 'not TMA' $O/dcheck_box16.log | sort | uniq -c | head -3))"
n=0
for c in ${S44C_ORDER:-16 64 e16 w16 p16 s16}; do  # box rows; w: whole rows; p: L2 promotion 256 B; s: 3 stages; e: evict_first
  [ $(left) -gt 25 ] || break
  decode_run decode_${n}_$c 40 FLEXATTN_DECODE_TMA_BOX=${c//[a-z]/} FLEXATTN_DECODE_TMA_WHOLE=$([[ $c == w* ]] && echo 1 || echo 0) \
    FLEXATTN_DECODE_TMA_L2=$([[ $c == p* ]] && echo 256 || echo 128) FLEXATTN_DECODE_STAGES=$([[ $c == s* ]] && echo 3 || echo 2) \
    FLEXATTN_DECODE_EVICT_FIRST=$([[ $c == e* ]] && echo 1 || echo 0)
  n=$((n + 1))
done
# Split counts at 8x8k with TMA tiles (the heuristic takes 6: 384 CTAs on 396 slots, one wave).
decode_bench splits 20 40 --splits 4,5,6,7,8,9,12,18
grep -E "8192|splits" $O/bench_splits.log | head -24
decode_bench merge0 15 30 FLEXATTN_DECODE_MERGE=0 --splits 6
grep -E "8192|splits" $O/bench_merge0.log | head -8
if [ $(left) -gt 30 ]; then
  M=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_requests_srcunit_tex_op_read.sum
  FLEXATTN_DECODE_TMA_BOX=16 timeout $(cap 40 10) ncu --metrics $M -k "regex:flexattn_decode_m16" -c 1 --launch-skip 8 \
    --csv python3 bench/lab/round/decode_ncu17.py flexattn > $O/ncu_box16.csv 2> $O/ncu_box16.err
  echo "ncu box16 rc=$? ($(el) s)"; python3 bench/lab/round/ncu_table.py $O/ncu_box16.csv
fi
if [ $(left) -gt 25 ]; then  # 1x128k's split kernel under the same ncu: same bytes and CTA count as 8x8k, 2x rows per CTA
  timeout $(cap 40 10) ncu --metrics $M -k "regex:flexattn_decode_m16" -c 1 --launch-skip 8 --csv \
    python3 bench/lab/round/decode_ncu17.py flexattn 1 131072 > $O/ncu_128k.csv 2> $O/ncu_128k.err
  echo "ncu 1x128k rc=$? ($(el) s)"; python3 bench/lab/round/ncu_table.py $O/ncu_128k.csv
fi
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
