#!/usr/bin/env bash
# Session 10, round 5: is the persistent backward (FLEXATTN_SM90_BWD_PERSISTENT=1, measured at D=128 only, no gain)
# better at D=64, where the document / sliding backward runs at 108 / 191 TFLOP/s (torch-flex 175 / 213)?
# B=2 H=16 S=8192 D=64 backward ms, default vs persistent, document / sliding / causal.
. "$(dirname "$0")/lib.sh"
out_dir s10f; L=$O
build_gpu $O flexattn
python3 -c "import numpy as np, sys; sys.path.insert(0, 'bench'); import bench_cases as bc; np.save('$O/doc.npy', np.array(bc.doc_ids(8192), dtype=np.int32))"
one() {  # persistent case
  local a=(); case $2 in causal) a=(--mask causal) ;; sliding) a=(--mask sliding_window:1023) ;;
    document) a=(--mask-expr "doc_ids[q_idx] == doc_ids[kv_idx] && q_idx >= kv_idx" --buffer doc_ids=$O/doc.npy) ;; esac
  env FLEXATTN_SM90_BWD_PERSISTENT=$1 timeout 60 $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D 64 "${a[@]}" --backward > $O/p$1_$2.log 2>&1
}
for m in document sliding causal; do one 0 $m & one 1 $m & wait; done  # compiles in parallel; timed runs below
for m in document sliding causal; do for c in 0 1; do one $c $m; done; done
echo "== B=2 H=16 S=8192 D=64 backward ms: default / persistent ($(el) s)"
for m in document sliding causal; do echo "$m: $(ms_of $O/p0_$m.log backward) / $(ms_of $O/p1_$m.log backward)"; done
