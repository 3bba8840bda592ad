#!/usr/bin/env bash
# Prepared in session 33: where the deterministic learnable relative bias backward's extra time goes (issue 6: +17.3 /
# +24.7 % at D 128 / 64 on the H200 record; the exact 64-bit integer sums of kernels/common/exact_sum.h). ncu of the
# main backward kernel, default against deterministic, D=64 (the larger cost): speed of light, memory workload (L2
# atomics), warp state and the SASS source page; then the top stall lines of each.
. "$(dirname "$0")/lib.sh"
out_dir s34b; L=$O
deadline ${S34B_DEADLINE:-300}
nvidia-smi --query-gpu=name --format=csv,noheader
build_gpu $O flexattn
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for mode in default det; do
  d=(); [ $mode = det ] && d=(--deterministic)
  args=(run --backend cuda --dtype bf16 -B 2 -H 16 -Q 4096 -D 64 --score relbias --backward "${d[@]}")
  $F "${args[@]}" > $O/warm_$mode.log 2>&1
  timeout $(cap 100 10) $ncu --kernel-name regex:'flexattn_bwd$' --launch-count 1 --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section WarpStateStats --section SourceCounters --import-source yes \
    -o $O/ncu_$mode -f $F "${args[@]}" > $O/ncu_$mode.log 2>&1
  echo "ncu $mode rc=$? ($(el) s)"
  $ncu --import $O/ncu_$mode.ncu-rep --page details > $O/ncu_$mode.details.txt 2>&1
  $ncu --import $O/ncu_$mode.ncu-rep --page source --csv --print-source sass > $O/ncu_$mode.sass.csv 2>&1
  grep -E "^ +Duration|Elapsed Cycles|SM Active Cycles|L2 Cache Throughput|Mem Busy" $O/ncu_$mode.details.txt | head -6
  python3 bench/lab/round/ncu_top.py $O/ncu_$mode.sass.csv 10
  rm -f $O/ncu_$mode.ncu-rep
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
