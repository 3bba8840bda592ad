#!/usr/bin/env bash
# Session 15 round 2: the backward's relative-bias gather (kernels/sm90/bwd_rel_gather_sm90.cuh: constant
# score + row[sg (q - kv) + c] read at immediate offsets of one pointer, two loads per entry row) and the corpus
# entry relbias+causal. Checks: `--quick` on the relbias / t5 / alibi entries, `run --check --backward` at odd lengths
# (fast and clamped forms, causal, D = 64 / 128 / 256, GQA, f16), memcheck on the clamped form; then B=2 H=16
# S=8192 forward + backward ms against round 1 (relbias+causal bwd 4.011 ms, relbias 5.754, causal 2.494). ~5 min.
. "$(dirname "$0")/lib.sh"
out_dir s15b; L=$O
deadline 480
BUILD_PY=ON build_gpu $O gpu_attention_check flexattn _C
quick_check 150 --only relbias --only t5 --only alibi --only full
python3 -c "
import numpy as np; r = np.random.default_rng(3)
np.save('$O/short.npy', r.standard_normal((4, 300)).astype(np.float32))"
for q in 1 17 129 1000 4097; do
  run_check --dtype bf16 -Q $q -D 128 --score relbias:const --mask causal --backward
  run_check --dtype bf16 -Q $q -D 128 --score relbias:const --backward
done
run_check --dtype bf16 -Q 1000 -D 64 --score relbias:const --mask causal --backward --hkv 2
run_check --dtype bf16 -Q 777 --kv 1000 -D 256 --score relbias:const --mask causal --backward
run_check --dtype f16 -Q 333 -D 128 --score relbias:const --mask sliding_window:100 --backward
run_check --dtype bf16 -Q 129 --kv 1000 -D 128 --score relbias:const --backward
# constant rows that leave the buffer (clamped form): the mask reads the buffer, so it gets no gradient
CL=(--score-expr "score + bias[h, q_idx - kv_idx]" --buffer bias=$O/short.npy)
run_check --dtype bf16 -Q 1000 -D 128 "${CL[@]}" --mask-expr "q_idx >= kv_idx && bias[0, 0] > -1000000.0" --backward
run_check --dtype bf16 -Q 1000 -D 64 "${CL[@]}" --mask-expr "bias[0, 0] > -1000000.0" --backward
run_check --dtype bf16 -Q 517 -D 128 --score-expr "bias[h, kv_idx - q_idx + 150] + score" --buffer bias=$O/short.npy --mask-expr "bias[1, 1] < 1000000.0" --backward
run_check_summary
timeout $(cap 90 5) compute-sanitizer --tool memcheck $F run --backend cuda --dtype bf16 -B 1 -H 4 -Q 1000 -D 128 "${CL[@]}" --mask-expr "q_idx >= kv_idx && bias[0, 0] > -1000000.0" --backward > $O/memcheck.log 2>&1
echo "memcheck rc=$? ($(el) s)"; grep "ERROR SUMMARY" $O/memcheck.log
run_one() {  # run_one NAME ARGS...
  local n=$1; shift
  FLEXATTN_JIT_DEBUG=1 timeout $(cap 90 5) $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 --backward "$@" > $O/run_$n.log 2>&1
  echo "$n fwd $(ms_of $O/run_$n.log forward) bwd $(ms_of $O/run_$n.log backward) compiles $(grep -c 'jit\] compiled' $O/run_$n.log)"
}
run_one causal -D 128 --mask causal
run_one relbias_causal -D 128 --score relbias:const --mask causal
run_one relbias -D 128 --score relbias:const
run_one relbias_causal_d64 -D 64 --score relbias:const --mask causal
run_one causal_d64 -D 64 --mask causal
echo "total $(el) s"
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
