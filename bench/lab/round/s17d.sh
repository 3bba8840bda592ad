#!/usr/bin/env bash
# Session 17 round 4: the 8x8k decode step (issue 7: 3137 GB/s in the record, cuDNN 3409, 3500 wanted) under
# bench/run.py's timing: kernel durations and span per implementation (torch.profiler), dirty vs clean L2 flush;
# then flexattn alone with the decode knobs that a flushed L2 might favour (stages, L2 prefetch, split counts).
. "$(dirname "$0")/lib.sh"
out_dir s17d; L=$O
deadline 330
BUILD_PY=ON build_gpu $O flexattn _C
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python:$PWD/bench PYTHONUNBUFFERED=1
timeout $(cap 120 10) python3 bench/lab/round/decode_profile17.py > $O/profile.log 2>&1; echo "profile rc=$? ($(el) s)"
cat $O/profile.log | grep -v Warning | head -30
for cfg in FLEXATTN_DECODE_STAGES=3 FLEXATTN_DECODE_PREFETCH=1 FLEXATTN_DECODE_PREFETCH=2 FLEXATTN_DECODE_SPLITS=4 \
           FLEXATTN_DECODE_SPLITS=12 FLEXATTN_DECODE_PDL=0; do
  [ $(left) -gt 30 ] || break
  env $cfg timeout 40 python3 bench/lab/round/decode_profile17.py flexattn > $O/p_$cfg.log 2>&1
  echo "$cfg: $(grep '^==' $O/p_$cfg.log)"
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
