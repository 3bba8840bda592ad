#!/usr/bin/env bash
# Prepared in session 33: where the deterministic learnable relative bias backward's extra time goes (issue 6: +17.3 /
# +24.7 % at D 128 / 64 on the H200 record; the exact 64-bit integer sums of kernels/common/exact_sum.h). ncu of the
# main backward kernel (ncu_full: --set full), default against deterministic, D=64 (the larger cost); then the top
# stall lines of each.
. "$(dirname "$0")/lib.sh"
out_dir s34b; L=$O
deadline ${S34B_DEADLINE:-300}
nvidia-smi --query-gpu=name --format=csv,noheader
build_gpu $O flexattn
for mode in default det; do
  d=(); [ $mode = det ] && d=(--deterministic)
  args=(run --backend cuda --dtype bf16 -B 2 -H 16 -Q 4096 -D 64 --score relbias --backward "${d[@]}")
  $F "${args[@]}" > $O/warm_$mode.log 2>&1
  ncu_full $mode 'flexattn_bwd$' 120 $F "${args[@]}"
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
