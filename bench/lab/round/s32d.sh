#!/usr/bin/env bash
# Session 32, after s32c: one 64-bit addition per value (windows every 8 bits, 33 words per element) instead of two
# for 3 values in 4. s32c (H100): deterministic learnable relbias fwd+bwd +25.5 % (11.83 ms against 9.42). Predicted
# ~+17 % (the exact adds' ~2.4 ms over the fp32 atomics scale with the reductions issued).
. "$(dirname "$0")/lib.sh"
out_dir s32d; L=$O
deadline ${S32D_DEADLINE:-110}
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
timeout $(cap 40 5) $CHECK --deterministic --only learnable > $O/det.log 2>&1
echo "--deterministic learnable rc=$? $(pass_fail $O/det.log) ($(el) s)"; grep -m5 "^FAIL" $O/det.log
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
timeout $(cap 60 5) python3 bench/lab/s32/det_bias_time.py 8192 > $O/det_bias_time.log 2>&1
echo "det_bias_time rc=$? ($(el) s)"; grep "^S=" $O/det_bias_time.log | head -1
