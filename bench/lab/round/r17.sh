#!/usr/bin/env bash
# Session 5, round 1: profiles for the helpers (ncu --set full + SASS stall samples) of the kernels with the
# largest gaps to their targets (issue 6 dense backward, issue 5 ALiBi and D=64 forward, relbias backward,
# issue 7 decode 8x8k), and the alibi_slopes check of issue 3 in detail.
. "$(dirname "$0")/lib.sh"
mkdir -p $OUT/prof $OUT/logs
build_gpu $OUT/logs flexattn gpu_attention_check gpu_decode_check
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
prof() {  # name kernel-filter args...
  local name=$1 filt=$2; shift 2
  local t1=$(date +%s)
  $F "$@" > /dev/null 2>&1   # compile outside the profiler
  timeout 150 $NCU --kernel-name "$filt" --launch-skip 1 --launch-count 1 --set full --import-source yes \
     -o $OUT/prof/$name -f $F "$@" > $OUT/logs/ncu_$name.log 2>&1
  $NCU --import $OUT/prof/$name.ncu-rep --page details > $OUT/prof/$name.details.txt 2>&1
  $NCU --import $OUT/prof/$name.ncu-rep --page source --csv --print-source sass > $OUT/prof/$name.sass.csv 2>&1
  echo "$name: $(( $(date +%s) - t1 )) s, $(grep -E '^ +Duration' $OUT/prof/$name.details.txt | head -1)"
}
prof bwd_dense_d128 flexattn_bwd run -B 2 -H 16 -Q 4096 -D 128 --dtype bf16 --backend cuda --backward
prof fwd_alibi_d128 flexattn_fwd run -B 2 -H 16 -Q 4096 -D 128 --dtype bf16 --backend cuda --score alibi --mask causal
prof fwd_full_d64 flexattn_fwd run -B 2 -H 16 -Q 8192 -D 64 --dtype bf16 --backend cuda
prof bwd_relbias_d128 flexattn_bwd run -B 2 -H 16 -Q 2048 -D 128 --dtype bf16 --backend cuda --score relbias --backward
prof decode_8x8k regex:decode run -B 8 -H 32 --hkv 8 -Q 1 --kv 8192 -D 128 --dtype bf16 --backend cuda
for d in 64 128; do
  timeout 60 $F run -B 2 -H 4 --hkv 2 -Q 257 --kv 300 -D $d --dtype bf16 --score alibi_slopes --backend cuda --check --backward > $OUT/logs/alibi_slopes_d$d.log 2>&1
  echo "alibi_slopes D=$d rc=$?: $(grep -E 'dslopes|FAIL' $OUT/logs/alibi_slopes_d$d.log | tr '\n' ' ')"
done
cd $OUT && tar czf prof.tgz prof logs && rm -rf prof
