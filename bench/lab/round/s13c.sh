#!/usr/bin/env bash
# Session 13 round 3: the rel-gather forward (codegen's kRelGather, FLEXATTN_SM90_REL_GATHER: a relative-position
# bias read at compile-time offsets per tile, 34 loads per thread and tile instead of 64 gathers with per-entry
# index math). --quick on relbias / t5 / text; `run --check` (forward) at odd lengths, both signs, a bias too short
# for the tile (the general branch), f16, D=64; memcheck on one; then forward A/B FLEXATTN_SM90_GATHER=1 / 0 at
# B=2 H=16 S=8192 (relbias_full, D=128 and 64). ~4 min.
. "$(dirname "$0")/lib.sh"
out_dir s13c; L=$O
deadline 400
BUILD_PY=ON build_gpu $O gpu_attention_check flexattn _C
quick_check 90 --only relbias --only t5 --only text
python3 -c "
import numpy as np; r = np.random.default_rng(3)
np.save('$O/short.npy', r.standard_normal((4, 300)).astype(np.float32))
np.save('$O/long.npy', r.standard_normal((4, 9000)).astype(np.float32))"
for q in 1 17 127 129 1000 4097; do run_check --dtype bf16 -Q $q -D 128 --score relbias; done
run_check --dtype bf16 -Q 1000 --kv 700 -D 64 --score relbias
run_check -Q 777 -D 128 --dtype f16 --score relbias --mask causal
run_check --dtype bf16 -Q 1000 -D 128 --score-expr "score + bias[h, q_idx - kv_idx]" --buffer bias=$O/short.npy
run_check --dtype bf16 -Q 1000 -D 128 --score-expr "bias[h, kv_idx - q_idx + 4000] + score" --buffer bias=$O/long.npy
run_check --dtype bf16 -Q 4097 -D 128 --score-expr "score + bias[h, 5000 - kv_idx + q_idx]" --buffer bias=$O/long.npy --mask sliding_window:300
run_check_summary
timeout $(cap 60 5) compute-sanitizer --tool memcheck $F run --backend cuda --dtype bf16 -B 1 -H 2 -Q 129 -D 128 --score relbias > $O/memcheck.log 2>&1
echo "memcheck rc=$? $(grep -c 'Invalid' $O/memcheck.log) invalid ($(el) s)"; grep "ERROR SUMMARY" $O/memcheck.log
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
for v in 1 0 1; do
  FLEXATTN_SM90_GATHER=$v timeout $(cap 60 5) python3 bench/run.py --suite long --impls flexattn --cases relbias_full --no-warm --reps 30 --out $O/b$v > $O/b$v.log 2>&1
  echo "bench gather=$v rc=$? ($(el) s)"; grep -E "^\| relbias" $O/b$v.log | cut -d'|' -f2,4,6
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
