#!/usr/bin/env bash
# Session 17 round 6: the decode softmax's lazy reference max (attn_decode.cuh decode_softmax_step: O rescaled only
# when a row's offset moved, which after the first tiles it rarely does). Correctness (gpu_decode_check), then the
# 8x8k step under bench/run.py's timing with FLEXATTN_DECODE_LAZY=1 (default) / 0. Predicted: kernel 77 -> 73-74 us.
. "$(dirname "$0")/lib.sh"
out_dir s17f; L=$O
deadline 200
BUILD_PY=ON build_gpu $O flexattn _C gpu_decode_check
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python:$PWD/bench PYTHONUNBUFFERED=1
timeout $(cap 80 10) $DCHECK > $O/dcheck.log 2>&1; echo "gpu_decode_check rc=$? $(tail -1 $O/dcheck.log) ($(el) s)"
grep -m3 FAIL $O/dcheck.log
for lz in 1 0 1; do
  [ $(left) -gt 20 ] || break
  FLEXATTN_DECODE_LAZY=$lz timeout 30 python3 bench/lab/round/decode_profile17.py flexattn > $O/p_lazy$lz.log 2>&1
  echo "lazy=$lz: $(grep -h '^==\|decode_m16\|span' $O/p_lazy$lz.log | tr -s ' ' | tr '\n' ' ')"
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
