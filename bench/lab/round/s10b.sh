#!/usr/bin/env bash
# Issue 6's open question: where the deterministic causal D=128 backward (+45 % over the default, session 9) waits.
# ncu --set full with the SASS source page of the main backward kernel, default vs deterministic (B=2 H=16
# S=4096 causal; the kernel is the same code with dq_sem set), into $OUT (gzipped CSV, ~0.2 MB each).
# Analysis: bench/lab/ncu_regions.py <csv> (samples by execution-count class and the top stall sites).
. "$(dirname "$0")/lib.sh"
out_dir s10b; L=$O
build_gpu $O flexattn
for mode in default det; do
  d=(); [ $mode = det ] && d=(--deterministic)
  $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 4096 -D 128 --mask causal --backward "${d[@]}" > $O/warm_$mode.log 2>&1
  timeout 150 ncu --set full --import-source yes -k regex:flexattn_bwd$ -c 1 -o $O/bwd_$mode $F run --backend cuda --dtype bf16 \
    -B 2 -H 16 -Q 4096 -D 128 --mask causal --backward "${d[@]}" > $O/ncu_$mode.log 2>&1; echo "ncu $mode rc=$? ($(el) s)"
  ncu --import $O/bwd_$mode.ncu-rep --page source --csv --print-source sass > $O/bwd_${mode}_sass.csv 2>/dev/null
  ncu --import $O/bwd_$mode.ncu-rep --page details --csv > $O/bwd_${mode}_details.csv 2>/dev/null
  rm -f $O/bwd_$mode.ncu-rep; gzip -f $O/bwd_${mode}_sass.csv
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
