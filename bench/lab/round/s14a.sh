#!/usr/bin/env bash
# Session 14 round 1: the sm90 forward without its tail branch (the tail tile takes its kind's branch, then
# drop_past_end; the per-column wrap loop that was most of ptxas's time is gone except for rel-gather
# variants) and bench_torch.time_ms's GPU hold. `--quick` on every case; `run --check` at the odd lengths
# (1, 17, 127, 129, 1000, 4097) for the masked and modded variants, f16, D=64 with GQA, unequal Q / KV, a
# rel-gather bias short enough for the general branch; memcheck on two tail cases; then bench/run.py long,
# flexattn only, forward: cold compile seconds per variant (issue 5 wants <= 2 s) and TFLOP/s. ~6 min.
. "$(dirname "$0")/lib.sh"
out_dir s14a; L=$O
deadline 540
BUILD_PY=ON build_gpu $O gpu_attention_check flexattn _C
quick_check 200
python3 -c "
import numpy as np; r = np.random.default_rng(5)
np.save('$O/short.npy', r.standard_normal((4, 300)).astype(np.float32))
np.save('$O/docs.npy', np.sort(r.integers(0, 6, 5000)).astype(np.int32))"
for q in 1 17 127 129 1000 4097; do run_check --dtype bf16 -Q $q -D 128 --mask causal; done
for q in 17 129 1000; do
  run_check --dtype bf16 -Q $q -D 128 --mask causal --score softcap:30
  run_check --dtype bf16 -Q $q -D 128 --mask causal --score alibi
  run_check --dtype bf16 -Q $q -D 128 --mask sliding_window:100
  run_check --dtype bf16 -Q $q -D 128 --mask prefix_lm:50
  run_check --dtype bf16 -Q $q -D 128 --score relbias
done
run_check --dtype bf16 -Q 4097 -D 128 --score softcap:30
run_check --dtype bf16 -Q 1000 -D 128 --mask-expr "docs[q_idx] == docs[kv_idx] && q_idx >= kv_idx" --buffer docs=$O/docs.npy
run_check --dtype bf16 -Q 4097 -D 128 --mask-expr "docs[q_idx] == docs[kv_idx]" --buffer docs=$O/docs.npy
run_check --dtype bf16 -Q 1000 -D 128 --score-expr "score + bias[h, q_idx - kv_idx]" --buffer bias=$O/short.npy
run_check --dtype f16 -Q 777 -D 128 --mask causal --score softcap:50
run_check --dtype bf16 -Q 1000 --kv 700 -D 64 --mask causal --hkv 2
run_check --dtype bf16 -Q 300 --kv 1001 -D 64 --mask sliding_window:64
run_check --dtype bf16 -Q 4097 -D 64 --mask causal --score softcap:30
run_check_summary
for a in "--mask causal -Q 129" "--mask causal --score softcap:30 -Q 1000"; do
  timeout $(cap 60 5) compute-sanitizer --tool memcheck $F run --backend cuda --dtype bf16 -B 1 -H 2 -D 128 $a > $O/memcheck.log 2>&1
  echo "memcheck ($a) rc=$? $(grep -c 'Invalid' $O/memcheck.log) invalid ($(el) s)"; grep "ERROR SUMMARY" $O/memcheck.log
done
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
rm -rf $FLEXATTN_CACHE_DIR
timeout $(cap 200 10) python3 bench/run.py --suite long --impls flexattn --no-warm --reps 20 --out $O/bench > $O/bench.log 2>&1
echo "bench rc=$? ($(el) s)"
python3 - "$O/bench/results.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    if r["S"] == 8192:
        print(f"{r['case']:16s} D={r['D']:3d} fwd {r.get('fwd_tflops') or 0:5.0f} compile {r.get('compile_fwd_s') or 0:5.2f} s")
PY
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
