#!/usr/bin/env bash
# Session 14 round 2: checks of round 1's tree plus (a) the variants without mask_mod back to two branches (their
# tail its own, so the softmax keeps a branch join below it: round 1's single branch let ptxas hoist the P V wait
# above the row max, full D=128 654 vs 677) and (b) the rel-gather variants' general branch as the clamped form of
# their 34 loads (no score_mod per entry, no wrap loops). `--quick` on relbias / t5 / text / full / softcap, then
# `run --check` at odd lengths on both. ~3 min.
. "$(dirname "$0")/lib.sh"
out_dir s14b; L=$O
deadline 300
BUILD_PY=ON build_gpu $O gpu_attention_check flexattn _C
quick_check 100 --only relbias --only t5 --only text --only full --only softcap
python3 -c "
import numpy as np; r = np.random.default_rng(3)
np.save('$O/short.npy', r.standard_normal((4, 300)).astype(np.float32))
np.save('$O/long.npy', r.standard_normal((4, 9000)).astype(np.float32))"
for q in 1 17 129 1000 4097; do run_check --dtype bf16 -Q $q -D 128; run_check --dtype bf16 -Q $q -D 128 --score relbias; done
run_check --dtype bf16 -Q 4097 -D 128 --score softcap:30
run_check --dtype bf16 -Q 1000 -D 64 --score alibi --hkv 2
run_check --dtype bf16 -Q 1000 --kv 700 -D 64 --score relbias
run_check --dtype f16 -Q 777 -D 128 --score relbias --mask causal
run_check --dtype f16 -Q 129 --kv 1000 -D 128 --score relbias
run_check --dtype bf16 -Q 1000 -D 128 --score-expr "score + bias[h, q_idx - kv_idx]" --buffer bias=$O/short.npy
run_check --dtype bf16 -Q 1000 -D 128 --score-expr "bias[h, kv_idx - q_idx + 4000] + score" --buffer bias=$O/long.npy
run_check --dtype bf16 -Q 4097 -D 128 --score-expr "score + bias[h, 5000 - kv_idx + q_idx]" --buffer bias=$O/long.npy --mask sliding_window:300
run_check --dtype bf16 -Q 333 -D 128 --score-expr "score + bias[h, q_idx - kv_idx + 100]" --buffer bias=$O/short.npy --mask causal
run_check_summary
timeout $(cap 60 5) compute-sanitizer --tool memcheck $F run --backend cuda --dtype bf16 -B 1 -H 2 -Q 1000 -D 128 --score-expr "score + bias[h, q_idx - kv_idx]" --buffer bias=$O/short.npy > $O/memcheck.log 2>&1
echo "memcheck rc=$? $(grep -c 'Invalid' $O/memcheck.log) invalid ($(el) s)"; grep "ERROR SUMMARY" $O/memcheck.log
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
