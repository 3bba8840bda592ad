#!/usr/bin/env bash
# Session 7, round 1 (tree e493ec5 = the landed stop 14): `make gpu-test` part 2 (the steps session 6 could not run
# on the final tree) and the backward's kernel breakdown at S=8192 (ncu gpu__time_duration per kernel: how much of a
# backward call is the main kernel vs the Δ preprocess, dQ-accumulator clear and dQ convert).
. "$(dirname "$0")/lib.sh"
out_dir r20; L=$O
GPU_TEST_ONLY="gpu_attention_sm80 gpu_attention_no_decode memcheck_sm80 gpu_block_mask gpu_decode gpu_decode_cp_async gpu_cp gpu_library_mods python_gpu" \
  timeout 400 bash scripts/gpu_test.sh > $O/gpu_test2.txt 2>&1; echo "gpu-test part 2 rc=$? ($(el) s)"
for m in causal full; do
  $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D 128 --mask $m --backward > /dev/null 2>&1
  timeout 90 ncu --metrics gpu__time_duration.sum --print-units base --csv $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D 128 \
    --mask $m --backward > $O/ncu_bwd_$m.csv 2> $O/ncu_bwd_$m.err
  echo "ncu $m rc=$? ($(el) s)"
  python3 - $O/ncu_bwd_$m.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value")
agg = collections.OrderedDict()
for r in rows[1:]:
    agg.setdefault(r[ki][:60], []).append(float(r[vi].replace(",", "")))
for k, v in agg.items(): print(f"  {k:60s} n={len(v)} us={[round(x/1000,1) for x in v]}")
PY
done
tail -14 $O/gpu_test2.txt
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null)
