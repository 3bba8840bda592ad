#!/usr/bin/env bash
# Session 43: the H200 record (s42r.sh's: build, record_suites, record_hd96), then, with the time left, the decode
# suite once more (flexattn and cuDNN) with the settings in S43R_EXTRA (e.g. "FLEXATTN_DECODE_WARP_RING=0
# FLEXATTN_DECODE_ROW_SPLIT=0": the previous defaults beside the record's decode run on the same warm machine).
. "$(dirname "$0")/lib.sh"
out_dir s43r; L=$O
deadline ${S43R_DEADLINE:-570}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C
record_suites
record_hd96
if [ -n "${S43R_EXTRA:-}" ] && [ "$(left)" -ge 45 ]; then
  env $S43R_EXTRA timeout $(cap 80 10) python3 bench/run.py --suite decode --impls flexattn,sdpa-cudnn \
    --out $O/decode_extra > $O/decode_extra.log 2>&1
  echo "decode extra ($S43R_EXTRA) rc=$? ($(el) s)"; grep -E "^\| (flexattn|sdpa-cudnn)" $O/decode_extra.log | head -12
fi
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
