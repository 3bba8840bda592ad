#!/usr/bin/env bash
# Session 28 (H100): FLEXATTN_SM90_REL_DIAG=1 failed `relbias(learnable)` L=1000 D=64 G=4 (out, lse, max, grads all off)
# in the gpu_attention_rel_diag step, after L=17 and 129 passed. Where does it break: `run --check` forward over lengths
# and head dims, rotated vs peeled loop; then the gpu-test steps not yet run on this tree (with the time left).
. "$(dirname "$0")/lib.sh"
out_dir s28c; L=$O
deadline ${S28C_DEADLINE:-420}
build_gpu $O flexattn gpu_attention_check
chk() {  # name, env..., -- run args
  local name=$1; shift; local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout $(cap 60 5) $F run --backend cuda --dtype bf16 --check "$@" > $O/$name.log 2>&1
  echo "$name rc=$? $(grep -E '^  (out|lse) ' $O/$name.log | tr -s ' ' | tr '\n' ' ')"
}
for q in 129 256 257 384 1000; do
  chk rd_d64_q$q FLEXATTN_SM90_REL_DIAG=1 -- -B 2 -H 4 --hkv 1 -Q $q -D 64 --score relbias
done
chk rd_d128_q1000 FLEXATTN_SM90_REL_DIAG=1 -- -B 2 -H 4 --hkv 1 -Q 1000 -D 128 --score relbias
chk rd_d64_q1000_peeled FLEXATTN_SM90_REL_DIAG=1 FLEXATTN_SM90_ROTATED=0 -- -B 2 -H 4 --hkv 1 -Q 1000 -D 64 --score relbias
chk rd_d64_q1000_b1h1 FLEXATTN_SM90_REL_DIAG=1 -- -B 1 -H 1 -Q 1000 -D 64 --score relbias
chk rd_t5_d64_q1000 FLEXATTN_SM90_REL_DIAG=1 -- -B 1 -H 2 -Q 1000 -D 64 --score t5
chk rd0_d64_q1000 FLEXATTN_SM90_REL_DIAG=0 -- -B 2 -H 4 --hkv 1 -Q 1000 -D 64 --score relbias
cp $O/rd_d64_q1000.log $O/sample.log
echo "[$(el)s] gpu-test steps"
GPU_TEST_ONLY="memcheck_sm80 gpu_decode_cp_async python_gpu" timeout $(cap 400 5) bash scripts/gpu_test.sh > $O/gt.log 2>&1
echo "gpu-test rc=$?"; tail -15 $O/gt.log
