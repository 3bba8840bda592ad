#!/usr/bin/env bash
# Session 33, after s33d: s33d's A/B/B/A (bench harness, long128) had the rank warp at deterministic causal D=128
# 2.806 / 2.825 ms against 3.100 / 3.097 without (-9.5 %; +12 % over the default mode's 2.505), document -1.8 %,
# full -0.7 %; and its ncu put the deterministic document's extra kernel time at ~44 us of the bench's ~160 us:
# the rest is torch's NaN fill of every torch.empty in deterministic mode (~235 MB per backward), which the
# Python ops now skip for the buffers the kernels write whole. Checks of 5a54eaa (the rank warp first in the spill
# fallbacks), then the fill A/B (bench/lab/s33/det_fill_ab.py). Predicted: document D=128 det +17.5 % -> ~+8 %.
. "$(dirname "$0")/lib.sh"
out_dir s33e; L=$O
deadline ${S33E_DEADLINE:-330}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
timeout $(cap 110 5) $CHECK --deterministic > $O/det.log 2>&1
echo "--deterministic rc=$? $(pass_fail $O/det.log) ($(el) s)"; grep -m5 "^FAIL" $O/det.log
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
timeout $(cap 80 10) python3 -m pytest -q -p no:cacheprovider tests/python/gpu/test_gpu_vs_torch.py tests/python/test_torch.py \
  -k "deterministic or grad or fill" > $O/pytest.log 2>&1; echo "pytest rc=$? ($(el) s)"; tail -1 $O/pytest.log
timeout $(cap 100 10) python3 bench/lab/s33/det_fill_ab.py > $O/fill.log 2>&1; echo "fill A/B rc=$? ($(el) s)"
grep -E "^row|Error|error" $O/fill.log | cut -c5- | head -8
quick_check 100
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
