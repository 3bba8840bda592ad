#!/usr/bin/env bash
# Session 15 round 4: the position clamp (codegen: b, h, q_idx, kv_idx as gather indices take the upper clamp only)
# and the backward gather, across the corpus: `--quick` (every entry, D = 64 / 128, odd lengths, GQA, backward),
# `run --check` on buffer-indexed masks and scores at odd lengths (forward, backward, the decode path), memcheck;
# then the cold forward compile of the masked cases again (round 1: document 1.86 s, sliding 1.28, causal 1.27).
. "$(dirname "$0")/lib.sh"
out_dir s15d; L=$O
deadline 420
BUILD_PY=ON build_gpu $O gpu_attention_check flexattn _C
quick_check 200
python3 -c "
import numpy as np; r = np.random.default_rng(5)
np.save('$O/rows.npy', r.standard_normal((4, 5000)).astype(np.float32))"
for q in 17 1000 4097; do run_check --dtype bf16 -Q $q -D 128 --mask document:3 --backward; done
run_check --dtype bf16 -Q 1000 --kv 777 -D 64 --mask document:5 --backward --hkv 2
run_check --dtype bf16 -Q 1 --kv 4097 -D 128 --mask document:3
run_check --dtype bf16 -Q 16 --kv 1000 -D 128 --mask document:4 --hkv 1
run_check --dtype f16 -Q 129 -D 128 --mask-expr "rows[h, kv_idx] > -0.5" --buffer rows=$O/rows.npy --backward
run_check --dtype bf16 -Q 1000 -D 64 --score relbias --mask causal --backward
run_check --dtype bf16 -Q 333 -D 128 --score-expr "score + rows[h, q_idx] * 0.1" --buffer rows=$O/rows.npy --mask causal --backward
run_check_summary
timeout $(cap 60 5) compute-sanitizer --tool memcheck $F run --backend cuda --dtype bf16 -B 1 -H 2 -Q 1000 -D 128 --mask document:3 --backward > $O/memcheck.log 2>&1
echo "memcheck rc=$? ($(el) s)"; grep "ERROR SUMMARY" $O/memcheck.log
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python:$PWD/bench
probe() {  # probe CASE D MODE
  FLEXATTN_CACHE_DIR=$(mktemp -d /tmp/cp.XXXX) FLEXATTN_JIT_DEBUG=1 timeout $(cap 60 5) \
    python3 bench/lab/s15/compile_probe.py "$@" 2>> $O/probe_jit.log | tee -a $O/probe.log
}
for c in document sliding1024 causal; do probe $c 128 alone; done
probe document 128 alone
echo "total $(el) s"
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
