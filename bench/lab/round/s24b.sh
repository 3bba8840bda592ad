#!/usr/bin/env bash
# Session 24 round 3 (after s24a on a warm machine, or alone): distance-only biases through per-warp tables
# (FLEXATTN_SM90_REL_DIAG=1, never run on a GPU): T5's bucketed bias evaluated once per distance of a warp's tile
# into shared memory instead of once per entry (kernels/sm90/fwd_rel_diag_sm90.cuh).
# 1. Correctness: gpu_attention_check --only t5 with it on; `run --check` at odd lengths, D 64 / 128, bf16 / f16,
#    causal, GQA, kv != q (the tables' unwrapped rows and tail columns), backward after it.
# 2. Speed: B=2 H=16 S=8192 forward ms (flexattn run, median of 5) off / on / on / off, D 128 and 64, with and
#    without causal; cold compile (a fresh kernel cache) of each.
# 3. The relative-bias gather through the tables too (REL_DIAG=1 takes the gather shape): relbias_full A/B/B/A.
# Predicted: on is correct everywhere; t5 forward D=128 several times faster (per entry ~40 instructions of bucket
# math and a gather become 34 shared loads per 64 entries plus ~5 evaluations per lane and tile), near relbias_full
# (2.03 ms at D=128); relbias_full within +-3 % (34 shared loads instead of 34 L1 loads, plus the fill); cold compile of the forward 11.9 -> ~1.3 s locally (device: ~8 -> ~1 s).
. "$(dirname "$0")/lib.sh"
out_dir s24b; L=$O
deadline ${S24B_DEADLINE:-560}
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
export FLEXATTN_SM90_REL_DIAG=1
quick_check 90 --only t5 --only relbias
timeout $(cap 60 5) compute-sanitizer --tool memcheck --error-exitcode 3 $CHECK --quick --only t5 > $O/memcheck.log 2>&1
echo "memcheck --quick --only t5 rc=$? $(pass_fail $O/memcheck.log) ($(el) s)"; grep -m3 "Invalid\|ERROR SUMMARY" $O/memcheck.log
for q in 1 17 127 129 1000 4097; do run_check --dtype bf16 -Q $q -D 128 --score t5; done
run_check --dtype bf16 -Q 1000 -D 64 --score t5 --mask causal
run_check --dtype f16 -Q 300 --kv 1001 -D 128 --score t5:16:64 --mask sliding_window:100
run_check --dtype bf16 -Q 777 -D 128 --hkv 2 --score t5 --mask causal --backward
run_check --dtype f16 -Q 129 --kv 4097 -D 64 --score t5
run_check --dtype bf16 -Q 1000 -D 128 --score relbias:const --mask causal
run_check --dtype bf16 -Q 4097 -D 64 --score relbias --backward
run_check_summary
unset FLEXATTN_SM90_REL_DIAG
tdir=$O/timing; mkdir -p $tdir
for d in 128 64; do
  for mask in none causal; do
    margs=(); [ $mask = causal ] && margs=(--mask causal)
    row="t5 $mask D=$d |"
    for v in 0 1 1 0; do
      log=$tdir/t5_${mask}_d${d}_$v.log
      c0=$(date +%s.%N)
      FLEXATTN_SM90_REL_DIAG=$v FLEXATTN_CACHE_DIR=$PWD/build-gpu/cache-rd$v timeout $(cap 90 5) $F run --backend cuda \
        --dtype bf16 -B 2 -H 16 -Q 8192 -D $d --score t5 "${margs[@]}" > $log 2>&1
      row="$row $v:$(ms_of $log forward) ($(awk -v a=$c0 -v b=$(date +%s.%N) 'BEGIN { printf "%.1f s", b - a }'))"
    done
    echo "$row"
  done
done
echo "(forward ms per run, off on on off; in parentheses the whole run's wall time, the first of each value cold)"
# The gather shape through the tables (REL_DIAG=1 drops its row gathers and their clamped third branch), and the
# bench's Python-traced T5 (attention-gym's form: codegen must find it distance-only too).
fwd_sweep FLEXATTN_SM90_REL_DIAG "0 1" relbias_full,t5_full
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
