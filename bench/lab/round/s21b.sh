#!/usr/bin/env bash
# Session 21 round 2 (prepared in session 21, which had no device): the tall forward tile (FLEXATTN_SM90_FWD_TALL=1:
# three consumer warpgroups, 192 x 128 tiles, 512 threads, consumers at setmaxnreg 160; D = Dv = 64 calls without a
# block mask). First run on a GPU: correctness before speed -- gpu_attention_check --quick with it on (its D=64 cases
# without a mask_mod take it), `run --check` at odd lengths, GQA, f16, a score_mod per family, then memcheck on one
# call; then the forward A/B/B/A on full and relbias_full (D=128 rows: the control, no tall kernel there).
# Predicted: dense D=64 423 -> 460-480 TFLOP/s (with two warpgroups one's softmax, an exp2 per 256 tensor-core flops,
# outlasts the other's GEMMs; a third warpgroup's GEMMs fill the gap, as in FA3's hdim-64 tile); relbias_full D=64 up
# by a similar share; D=128 unchanged.
. "$(dirname "$0")/lib.sh"
out_dir s21b; L=$O
deadline 420
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
export FLEXATTN_SM90_FWD_TALL=1
quick_check 100
for q in 65 127 129 191 193 1000 4097; do run_check --dtype bf16 -Q $q -D 64; done  # L > 64: not the decode family
run_check --dtype f16 -Q 777 -D 64 --score softcap:30
run_check --dtype bf16 -Q 1000 -D 64 --hkv 2 --score alibi
run_check --dtype bf16 -Q 300 --kv 1001 -D 64 --score relbias
run_check --dtype bf16 -Q 4097 -D 64 --score relbias:const
run_check --dtype bf16 -Q 1000 --kv 70 -D 64 --hkv 1
run_check_summary
echo "tall kernels compiled: $(grep -rl kSm90TallThreads $FLEXATTN_CACHE_DIR 2>/dev/null | wc -l) (cache files naming kSm90TallThreads)"
timeout $(cap 60 5) compute-sanitizer --tool memcheck $F run --backend cuda -B 1 -H 4 -Q 1000 -D 64 --dtype bf16 \
  > $O/memcheck.log 2>&1; echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $O/memcheck.log | tail -1) ($(el) s)"
unset FLEXATTN_SM90_FWD_TALL
fwd_sweep FLEXATTN_SM90_FWD_TALL "0 1" full,relbias_full
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
