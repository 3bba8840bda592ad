#!/usr/bin/env bash
# Session 42: the H200 record (s36r.sh's, the check skipped: the tree's GPU checks passed on an H100 in sessions 41 and
# 42), then, with the time left, the decode suite once with FLEXATTN_DECODE_ROW_SPLIT=1 (flexattn and cuDNN) beside the
# record's own decode run (row split off) on the same warm machine: s42a.sh's prediction, 8x8k +2-3 %.
. "$(dirname "$0")/lib.sh"
out_dir s42r; L=$O
deadline ${S42R_DEADLINE:-570}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C
record_suites
record_hd96
if [ "$(left)" -ge 45 ]; then
  FLEXATTN_DECODE_ROW_SPLIT=1 timeout $(cap 80 10) python3 bench/run.py --suite decode --impls flexattn,sdpa-cudnn \
    --out $O/decode_rowsplit > $O/decode_rowsplit.log 2>&1
  echo "decode row split rc=$? ($(el) s)"; grep -E "^\| (flexattn|sdpa-cudnn)" $O/decode_rowsplit.log | head -12
fi
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
