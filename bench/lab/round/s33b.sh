#!/usr/bin/env bash
# Session 33, after s33a: s33a's ncu (S=4096 causal D=128) had the deterministic backward's SMs active 87 % of its
# elapsed cycles against 99 % by default (active cycles +2.3 %, elapsed +16 %): the cost is idle SMs (the launch's
# tail: descending kv tiles dispatch the longest CTAs last), not waits inside the kernel. The tick model
# (bench/lab/s30/det_order_sim.py) predicts +13.6 % at S=4096 and only +7 % at S=8192, where the bench measures +25 %.
# So: the same light ncu (SOL, warp state, source counters) at S=8192, default / deterministic, and det18 timings.
. "$(dirname "$0")/lib.sh"
out_dir s33b; L=$O
deadline ${S33B_DEADLINE:-400}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for S in 8192; do
for mode in default det; do
  d=(); [ $mode = det ] && d=(--deterministic)
  args=(run --backend cuda --dtype bf16 -B 2 -H 16 -Q $S -D 128 --mask causal --backward "${d[@]}")
  $F "${args[@]}" > $O/warm_$mode.log 2>&1
  timeout $(cap 90 10) $ncu --kernel-name regex:'flexattn_bwd$' --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section SourceCounters --section LaunchStats --section Occupancy --import-source yes \
    -o $O/ncu_${mode}_$S -f $F "${args[@]}" > $O/ncu_${mode}_$S.log 2>&1
  echo "ncu $mode S=$S rc=$? ($(el) s)"
  $ncu --import $O/ncu_${mode}_$S.ncu-rep --page details > $O/ncu_${mode}_$S.details.txt 2>&1
  $ncu --import $O/ncu_${mode}_$S.ncu-rep --page source --csv --print-source sass > $O/ncu_${mode}_$S.sass.csv 2>&1
  grep -E "^ +Duration|Elapsed Cycles|SM Active Cycles" $O/ncu_${mode}_$S.details.txt | head -3
  rm -f $O/ncu_${mode}_$S.ncu-rep
done; done
det_timing det33 150 DET8_DIMS="128" DET18_CASES="causal document" DET18_VAR=FLEXATTN_SM90_BWD_HEAD_GROUPS DET18_VALUES="auto 0"
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
