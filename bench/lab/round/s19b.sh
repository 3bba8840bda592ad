#!/usr/bin/env bash
# Session 19 round 2 (issue 6): the deterministic backward's cost in GPU time (det18.py now times as bench/run.py
# does), launch order descending / ascending; then ncu SASS stall samples of causal D=128 default and deterministic.
. "$(dirname "$0")/lib.sh"
out_dir s19b; L=$O
deadline 420
BUILD_PY=ON build_gpu $O flexattn _C
det_timing det19 200 DET8_DIMS="128 64" DET18_VAR=FLEXATTN_SM90_BWD_DET_LAUNCH DET18_VALUES="descending ascending"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for mode in default det; do
  extra=$([ $mode = det ] && echo --deterministic)
  $F run -B 2 -H 16 -Q 8192 -D 128 --dtype bf16 --backend cuda --mask causal --backward $extra > $O/run_$mode.log 2>&1
  timeout $(cap 100 10) $NCU --kernel-name regex:'^flexattn_bwd$' --launch-count 1 --set full --import-source yes \
    -o $O/ncu_$mode -f $F run -B 2 -H 16 -Q 8192 -D 128 --dtype bf16 --backend cuda --mask causal --backward $extra \
    > $O/ncu_$mode.log 2>&1
  echo "ncu $mode rc=$? ($(el) s)"
  $NCU --import $O/ncu_$mode.ncu-rep --page details > $O/ncu_$mode.details.txt 2>&1
  $NCU --import $O/ncu_$mode.ncu-rep --page source --csv --print-source sass > $O/ncu_$mode.sass.csv 2>&1
  grep -E "^ +Duration|Issued Ipc|No Eligible|Eligible Warps" $O/ncu_$mode.details.txt | head -5
  python3 bench/lab/round/ncu_top.py $O/ncu_$mode.sass.csv 22
done
rm -f $O/*.ncu-rep
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
