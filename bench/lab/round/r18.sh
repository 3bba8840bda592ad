#!/usr/bin/env bash
# Session 5, final rounds on the committed defaults, `make gpu-test`'s steps split over two calls.
# PART=1: the default families (full gpu_attention_check, the replaced paths, memcheck) and the benchmark
#         rows for bench/results/h200-latest.json (`bench --suite long`, `--suite decode`).
# PART=2: the portable family, block masks, decode, cp, every library mod, the Python suite vs torch.
. "$(dirname "$0")/lib.sh"
mkdir -p $OUT/bench
if [ "${PART:-1}" = 1 ]; then
  GPU_TEST_PYTHON=0 GPU_TEST_ONLY="gpu_attention gpu_attention_s4 gpu_attention_per_tile gpu_attention_bwd_red memcheck" \
    timeout 400 bash scripts/gpu_test.sh > $OUT/gpu_test1.txt 2>&1; echo "gpu-test part 1 rc=$?"
  timeout 130 $F bench --suite long --backend cuda > $OUT/bench/long.log 2>&1; echo "long rc=$?"
  timeout 50 $F bench --suite decode --backend cuda > $OUT/bench/decode.log 2>&1; echo "decode rc=$?"
  tail -9 $OUT/gpu_test1.txt
  grep -v "^{" $OUT/bench/long.log | tail -18
  grep -v "^{" $OUT/bench/decode.log | grep -v "^ *$" | tail -12
else
  GPU_TEST_ONLY="gpu_attention_sm80 gpu_attention_no_decode memcheck_sm80 gpu_block_mask gpu_decode gpu_decode_cp_async gpu_cp gpu_library_mods python_gpu" \
    timeout 570 bash scripts/gpu_test.sh > $OUT/gpu_test2.txt 2>&1; echo "gpu-test part 2 rc=$?"
  tail -16 $OUT/gpu_test2.txt
fi
