#!/usr/bin/env bash
# Session 12: ncu --set full with the SASS source page of the main backward kernel: (a) the wide kernel (D=256,
# causal, B=2 H=16 S=8192; 387 TFLOP/s: where do its stalls sit — the one-stage Q / dO ring's loads, the n32
# S^T / dP^T GEMMs, the dQ hand-off?); (b) s12a's D=128 v2 on document and sliding (292 / 360 against 366 / 448).
# bench/lab/ncu_regions.py groups the SASS by execution count. ~5 min.
. "$(dirname "$0")/lib.sh"
out_dir s12d; L=$O
build_gpu $O flexattn
python3 -c "import numpy as np, sys; sys.path.insert(0, 'bench'); import bench_cases as bc; np.save('$O/doc.npy', np.array(bc.doc_ids(8192), dtype=np.int32))"
for m in wide document sliding; do
  D=128; a=(--mask sliding_window:1023)
  [ $m = document ] && a=(--mask-expr "doc_ids[q_idx] == doc_ids[kv_idx] && q_idx >= kv_idx" --buffer doc_ids=$O/doc.npy)
  [ $m = wide ] && D=256 && a=(--mask causal)
  args=(run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D $D --backward "${a[@]}")
  $F "${args[@]}" > $O/warm_$m.log 2>&1
  timeout 200 ncu --set full --import-source yes -k regex:flexattn_bwd$ -c 1 -o $O/bwd_$m $F "${args[@]}" > $O/ncu_$m.log 2>&1
  echo "ncu $m rc=$? ($(el) s)"
  ncu --import $O/bwd_$m.ncu-rep --page source --csv --print-source sass > $O/bwd_${m}_sass.csv 2>/dev/null
  ncu --import $O/bwd_$m.ncu-rep --page details --csv > $O/bwd_${m}_details.csv 2>/dev/null
  rm -f $O/bwd_$m.ncu-rep; gzip -f $O/bwd_${m}_sass.csv
  python3 bench/lab/ncu_regions.py $O/bwd_${m}_sass.csv.gz --top 12 | head -24
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
