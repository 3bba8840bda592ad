#!/usr/bin/env bash
# Issue 6, the D=64 document backward (108 TFLOP/s in session 10's record run, torch-flex 175; the persistent
# kernel +19 %): ncu --set full with the SASS source page of the main backward kernel, default vs persistent
# (B=2 H=16 S=8192 D=64, bench/run.py's document mask), into $OUT (gzipped CSV). Question: how much of each CTA is
# the fixed cost (K / V load, first Q / dO stage, dK / dV epilogue) against ~8 query tiles of work per kv tile?
# Analysis: bench/lab/ncu_regions.py <csv>, and the details page's SM active cycles vs elapsed.
. "$(dirname "$0")/lib.sh"
out_dir s11b; L=$O
build_gpu $O flexattn
python3 -c "import numpy as np, sys; sys.path.insert(0, 'bench'); import bench_cases as bc; np.save('$O/doc.npy', np.array(bc.doc_ids(8192), dtype=np.int32))"
args=(run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D 64 --backward
      --mask-expr "doc_ids[q_idx] == doc_ids[kv_idx] && q_idx >= kv_idx" --buffer doc_ids=$O/doc.npy)
for mode in default persistent; do
  e=(); [ $mode = persistent ] && e=(FLEXATTN_SM90_BWD_PERSISTENT=1)
  env "${e[@]}" $F "${args[@]}" > $O/warm_$mode.log 2>&1
  env "${e[@]}" timeout 150 ncu --set full --import-source yes -k regex:flexattn_bwd$ -c 1 -o $O/bwd_$mode $F "${args[@]}" \
    > $O/ncu_$mode.log 2>&1; echo "ncu $mode rc=$? ($(el) s)"
  ncu --import $O/bwd_$mode.ncu-rep --page source --csv --print-source sass > $O/bwd_${mode}_sass.csv 2>/dev/null
  ncu --import $O/bwd_$mode.ncu-rep --page details --csv > $O/bwd_${mode}_details.csv 2>/dev/null
  rm -f $O/bwd_$mode.ncu-rep; gzip -f $O/bwd_${mode}_sass.csv
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
