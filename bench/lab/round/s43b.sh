#!/usr/bin/env bash
# Session 43: FLEXATTN_DECODE_ROT_ROWS (decode_rotated.cuh). s43p.sh's ncu: padded ring rows cut half the row copies
# inside a source sector (+12.9 % bytes into L1/shared, 2.5x cuDNN's L2 requests). Rotated unpadded rows cut on sector
# edges. Predicted: the L2 -> SM bytes fall to ~269 MB and 8x8k gains some of its 7 % to cuDNN (H100: 2365 -> ~2420+).
# Correctness (gpu_decode_check with it on, alone and with the warp ring, side by side), then the decode suite (flexattn
# and cuDNN) base / rot / rot / base while the deadline allows.
. "$(dirname "$0")/lib.sh"
out_dir s43b; L=$O
deadline ${S43B_DEADLINE:-160}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C gpu_decode_check
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python:$PWD/bench PYTHONUNBUFFERED=1
dchecks 60 rot:FLEXATTN_DECODE_ROT_ROWS=1 rotwr:FLEXATTN_DECODE_ROT_ROWS=1,FLEXATTN_DECODE_WARP_RING=1
n=0
for c in base rot rot base; do
  [ $(left) -gt 15 ] || break
  env FLEXATTN_DECODE_ROT_ROWS=$([ $c = rot ] && echo 1 || echo 0) timeout $(cap 40 10) python3 bench/run.py \
    --suite decode --impls flexattn,sdpa-cudnn --out $O/decode_${n}_$c > $O/decode_${n}_$c.log 2>&1
  echo "decode $n $c rc=$? ($(el) s)"
  grep -E "^\| (flexattn|sdpa-cudnn)" $O/decode_${n}_$c.log | awk -F'|' '{print $2,$3,$6,$8,$11}' | head -12
  n=$((n + 1))
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
