#!/usr/bin/env bash
# Session 33, first round: the GPU checks of session 32's last commits, which never ran on a GPU (9ca84cc's review fixes
# of the exact buffer gradients, 262860a's shared float-bits helper for poly_exp2 / poly_rcp and once-per-arch
# compile), then ncu of the deterministic causal D=128 backward against the default one (issue 6: +25.7 % on the H100,
# 3.12 against 2.48 ms at S=8192) when time is left.
. "$(dirname "$0")/lib.sh"
out_dir s33a; L=$O
deadline ${S33A_DEADLINE:-575}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
quick_check 170
timeout $(cap 120 5) $CHECK --deterministic > $O/det.log 2>&1
echo "--deterministic rc=$? $(pass_fail $O/det.log) ($(el) s)"; grep -m5 "^FAIL" $O/det.log
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
timeout $(cap 80 10) python3 -m pytest -q -p no:cacheprovider tests/python/gpu/test_gpu_vs_torch.py \
  -k "deterministic or grad" > $O/pytest.log 2>&1; echo "pytest rc=$? ($(el) s)"; tail -1 $O/pytest.log
timeout $(cap 50 5) compute-sanitizer --tool memcheck $F run --backend cuda --check --dtype bf16 -B 2 -H 4 -Q 300 -D 128 \
  --score relbias --mask causal --backward --deterministic > $O/memcheck.log 2>&1
echo "memcheck relbias det rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' $O/memcheck.log) ($(el) s)"
for mode in default det; do
  [ "$(left)" -ge 70 ] || { echo "ncu $mode skipped (time)"; continue; }
  d=(); [ $mode = det ] && d=(--deterministic)
  $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 4096 -D 128 --mask causal --backward "${d[@]}" > $O/warm_$mode.log 2>&1
  ncu_full $mode 'flexattn_bwd$' 120 $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 4096 -D 128 --mask causal --backward "${d[@]}"
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
