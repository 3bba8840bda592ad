#!/usr/bin/env bash
# Session 5, final rounds on the committed defaults. PART=1: `make gpu-test`'s attention steps (every family,
# memcheck). PART=2: the rest of `make gpu-test` (block mask, decode, cp, every library mod, Python vs torch)
# and `flexattn bench --suite long` + `--suite decode` for bench/results/h200-latest.json.
set -u
cd "$(dirname "$0")/../../.."
export FLEXATTN_CACHE_DIR=$PWD/build-gpu/kernel-cache
if [ "${PART:-1}" = 1 ]; then
  GPU_TEST_PYTHON=0 GPU_TEST_ONLY="gpu_attention gpu_attention_sm80 gpu_attention_no_decode gpu_attention_per_tile gpu_attention_bwd_red gpu_attention_s4 memcheck memcheck_sm80" \
    timeout 590 bash scripts/gpu_test.sh 2>&1 | tail -16
else
  mkdir -p $OUT/bench
  GPU_TEST_ONLY="gpu_block_mask gpu_decode gpu_decode_cp_async gpu_cp gpu_library_mods python_gpu" \
    timeout 400 bash scripts/gpu_test.sh > $OUT/gpu_test2.txt 2>&1; echo "gpu-test part 2 rc=$?"
  timeout 120 build-gpu/tools/flexattn bench --suite long --backend cuda > $OUT/bench/long.log 2>&1; echo "long rc=$?"
  timeout 60 build-gpu/tools/flexattn bench --suite decode --backend cuda > $OUT/bench/decode.log 2>&1; echo "decode rc=$?"
  tail -12 $OUT/gpu_test2.txt
  grep -v "^{" $OUT/bench/long.log | tail -18
  grep -v "^{" $OUT/bench/decode.log | tail -10
fi
