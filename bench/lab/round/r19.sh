#!/usr/bin/env bash
# Session 6, final rounds on the committed tree: `make gpu-test`'s steps over two calls and the benchmark rows of
# bench/results/h200-latest.json (bench/run.py with the peers) in a third.
# PART=1: the default families (full gpu_attention_check, the replaced paths, memcheck) + bench/run.py --suite decode.
# PART=2: the portable family, block masks, decode, cp, every library mod, the Python suite vs torch.
# PART=3: bench/run.py --suite long --backward (B=2 H=16 S=8192, D=128 and 64, every case, all peers).
. "$(dirname "$0")/lib.sh"
mkdir -p $OUT/bench
py_env() { export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1; }
case "${PART:-1}" in
1)
  GPU_TEST_ONLY="gpu_attention gpu_attention_s4 gpu_attention_per_tile gpu_attention_bwd_red memcheck" \
    timeout 420 bash scripts/gpu_test.sh > $OUT/gpu_test1.txt 2>&1; echo "gpu-test part 1 rc=$?"
  py_env
  timeout 120 python3 bench/run.py --suite decode --out $OUT/bench/decode > $OUT/bench/decode.log 2>&1; echo "decode rc=$?"
  tail -9 $OUT/gpu_test1.txt
  grep -E "^\|" $OUT/bench/decode.log | tail -24 ;;
2)
  GPU_TEST_ONLY="gpu_attention_sm80 gpu_attention_no_decode memcheck_sm80 gpu_block_mask gpu_decode gpu_decode_cp_async gpu_cp gpu_library_mods python_gpu" \
    timeout 570 bash scripts/gpu_test.sh > $OUT/gpu_test2.txt 2>&1; echo "gpu-test part 2 rc=$?"
  tail -16 $OUT/gpu_test2.txt ;;
3)
  [ -x $F ] && ls build-gpu/bindings/_C*.so > /dev/null 2>&1 || {
    cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=ON > $OUT/configure.log 2>&1
    cmake --build build-gpu -j16 --target flexattn _C > $OUT/build.log 2>&1 || { grep error $OUT/build.log | head; exit 1; }; }
  py_env
  timeout ${LONG_BUDGET:-560} python3 bench/run.py --suite long --backward --out $OUT/bench/long > $OUT/bench/long.log 2>&1
  echo "long rc=$?"
  grep -E "^\|" $OUT/bench/long.log | tail -20 ;;
esac
# many small files do not all come back from the device: one archive of everything
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null)
