#!/usr/bin/env bash
# Session 43: issue 7's 8x8k (3238 GB/s, 3500 wanted). Two opt-ins, alone and together:
#  - FLEXATTN_DECODE_ROW_SPLIT=1 (session 42): walks without a block mask split rows evenly; predicted 8x8k +2-3 %.
#  - FLEXATTN_DECODE_WARP_RING=1: each m16 warp copies / waits for its own 16 K and V rows per stage on its own
#    mbarrier; no CTA barrier in the main loop. Predicted: a warp reissues its slice of a stage as soon as it read
#    it instead of after the slowest warp, so more bytes in flight per CTA; 8x8k +1-4 %, 1x128k and 64x4k alike.
# Correctness first (gpu_decode_check, every case, with each on; both checks side by side), then the decode suite
# (flexattn and cuDNN) over base / both / wr / both3 (both, 3 stages: 2 CTAs per SM) / both / base / rs while the
# deadline allows.
. "$(dirname "$0")/lib.sh"
out_dir s43a; L=$O
deadline ${S43A_DEADLINE:-420}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C gpu_decode_check
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python:$PWD/bench PYTHONUNBUFFERED=1
dchecks 150 rs:FLEXATTN_DECODE_ROW_SPLIT=1 both:FLEXATTN_DECODE_ROW_SPLIT=1,FLEXATTN_DECODE_WARP_RING=1 \
  wr3:FLEXATTN_DECODE_WARP_RING=1,FLEXATTN_DECODE_STAGES=3
envs_of() {
  case $1 in
    base) echo "FLEXATTN_DECODE_ROW_SPLIT=0" ;;
    rs) echo "FLEXATTN_DECODE_ROW_SPLIT=1" ;;
    wr) echo "FLEXATTN_DECODE_WARP_RING=1" ;;
    both) echo "FLEXATTN_DECODE_ROW_SPLIT=1 FLEXATTN_DECODE_WARP_RING=1" ;;
    both3) echo "FLEXATTN_DECODE_ROW_SPLIT=1 FLEXATTN_DECODE_WARP_RING=1 FLEXATTN_DECODE_STAGES=3" ;;
  esac
}
n=0
for c in base both wr both3 both base rs; do
  [ $(left) -gt 45 ] || break
  env $(envs_of $c) timeout $(cap 90 10) python3 bench/run.py --suite decode --impls flexattn,sdpa-cudnn \
    --out $O/decode_${n}_$c > $O/decode_${n}_$c.log 2>&1
  echo "decode $n $c rc=$? ($(el) s)"
  n=$((n + 1))
done
for f in $O/decode_*_*.log; do echo "== $(basename $f .log)"; grep -E "^\| (flexattn|sdpa-cudnn)" $f | head -12; done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
