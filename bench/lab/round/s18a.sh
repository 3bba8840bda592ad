#!/usr/bin/env bash
# Session 18 round 1 (issue 7): the decode K/V copies with an L2 evict-first policy (FLEXATTN_DECODE_L2_EVICT=1).
# Session 17 found ~9-10 us of the 8x8k call's 84.6 us under bench/run.py's timing is the write-back of the
# flush's dirty lines that the call's fills evict; evict-first fills should replace each other instead.
# 8x8k dirty / clean flush, flexattn off / on and cuDNN; the decode suite off / on (flexattn and cuDNN);
# gpu_decode_check with it on.
. "$(dirname "$0")/lib.sh"
out_dir s18a; L=$O
deadline 420
BUILD_PY=ON build_gpu $O flexattn _C gpu_decode_check
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python:$PWD/bench PYTHONUNBUFFERED=1
timeout $(cap 100 10) python3 bench/lab/round/decode_profile17.py flexattn,sdpa-cudnn > $O/profile_off.log 2>&1
echo "profile off rc=$? ($(el) s)"; grep -E "^==|main|span" $O/profile_off.log | head -12
FLEXATTN_DECODE_L2_EVICT=1 timeout $(cap 60 10) python3 bench/lab/round/decode_profile17.py flexattn > $O/profile_on.log 2>&1
echo "profile on rc=$? ($(el) s)"; grep -E "^==|span" $O/profile_on.log | head -6
FLEXATTN_DECODE_L2_EVICT=1 timeout $(cap 120 10) $DCHECK > $O/dcheck_on.log 2>&1
echo "dcheck on rc=$? $(pass_fail $O/dcheck_on.log) ($(el) s)"; grep ^FAIL $O/dcheck_on.log | head -3
for c in off on; do
  [ $(left) -gt 60 ] || break
  env $([ $c = on ] && echo FLEXATTN_DECODE_L2_EVICT=1) timeout $(cap 120 10) python3 bench/run.py --suite decode \
    --impls flexattn,sdpa-cudnn --out $O/decode_$c > $O/decode_$c.log 2>&1
  echo "decode $c rc=$? ($(el) s)"
done
for c in off on; do echo "== decode suite, L2 evict $c"; grep -E "^\| (flexattn|sdpa-cudnn)" $O/decode_$c.log | head -12; done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
