#!/usr/bin/env bash
# For session 12 (issue 6, D=128 document / sliding backward at 292 / 360 TFLOP/s against targets 366 / 448): ncu
# --set full with the SASS source page of the main backward kernel (the v2 at D=128), document and sliding window
# 1024, B=2 H=16 S=8192 D=128, as s11b.sh did for the D=64 first kernel (which found the partial tiles' branches).
# Question: per-tile element-wise code vs GEMM waits vs fixed cost (SM active vs elapsed; classes of
# bench/lab/ncu_regions.py by execution count). ~2 min.
. "$(dirname "$0")/lib.sh"
out_dir s12a; L=$O
build_gpu $O flexattn
python3 -c "import numpy as np, sys; sys.path.insert(0, 'bench'); import bench_cases as bc; np.save('$O/doc.npy', np.array(bc.doc_ids(8192), dtype=np.int32))"
for m in document sliding; do
  a=(--mask sliding_window:1023)
  [ $m = document ] && a=(--mask-expr "doc_ids[q_idx] == doc_ids[kv_idx] && q_idx >= kv_idx" --buffer doc_ids=$O/doc.npy)
  args=(run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D 128 --backward "${a[@]}")
  $F "${args[@]}" > $O/warm_$m.log 2>&1
  timeout 200 ncu --set full --import-source yes -k regex:flexattn_bwd$ -c 1 -o $O/bwd_$m $F "${args[@]}" > $O/ncu_$m.log 2>&1
  echo "ncu $m rc=$? ($(el) s)"
  ncu --import $O/bwd_$m.ncu-rep --page source --csv --print-source sass > $O/bwd_${m}_sass.csv 2>/dev/null
  ncu --import $O/bwd_$m.ncu-rep --page details --csv > $O/bwd_${m}_details.csv 2>/dev/null
  rm -f $O/bwd_$m.ncu-rep; gzip -f $O/bwd_${m}_sass.csv
  python3 bench/lab/ncu_regions.py $O/bwd_${m}_sass.csv.gz --top 12 | head -24
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
