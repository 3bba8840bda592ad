#!/usr/bin/env bash
# Session 18 round 2 (issue 7): contiguous caches' K / V tiles by one TMA tensor copy each (FLEXATTN_DECODE_KV_TMA=1:
# boxes of (D + 8) x 64 rows, unswizzled, into the ring's padded rows) instead of 128 per-row cp.async.bulk copies
# per stage, which the compiler serialises per warp through the uniform datapath. Correctness first
# (gpu_decode_check with it on), then 8x8k dirty / clean flush and the decode suite, off vs on.
. "$(dirname "$0")/lib.sh"
out_dir s18b; L=$O
deadline 420
BUILD_PY=ON build_gpu $O flexattn _C gpu_decode_check
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python:$PWD/bench PYTHONUNBUFFERED=1
FLEXATTN_DECODE_KV_TMA=1 timeout $(cap 150 10) $DCHECK > $O/dcheck_on.log 2>&1
echo "dcheck kv tma rc=$? $(pass_fail $O/dcheck_on.log) ($(el) s)"; grep ^FAIL $O/dcheck_on.log | head -5; tail -2 $O/dcheck_on.log
FLEXATTN_DECODE_KV_TMA=1 timeout $(cap 60 10) python3 bench/lab/round/decode_profile17.py flexattn > $O/profile_on.log 2>&1
echo "profile on rc=$? ($(el) s)"; grep -E "^==|flexattn_decode|span" $O/profile_on.log | head -6
timeout $(cap 60 10) python3 bench/lab/round/decode_profile17.py flexattn > $O/profile_off.log 2>&1
echo "profile off rc=$? ($(el) s)"; grep -E "^==|flexattn_decode|span" $O/profile_off.log | head -6
for c in on off; do
  [ $(left) -gt 40 ] || break
  env $([ $c = on ] && echo FLEXATTN_DECODE_KV_TMA=1) timeout $(cap 100 10) python3 bench/run.py --suite decode \
    --impls flexattn,sdpa-cudnn --out $O/decode_$c > $O/decode_$c.log 2>&1
  echo "decode $c rc=$? ($(el) s)"
done
for c in on off; do echo "== decode suite, kv tma $c"; grep -E "^\| (flexattn|sdpa-cudnn)" $O/decode_$c.log | head -12; done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
