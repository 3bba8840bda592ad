#!/usr/bin/env bash
# Session 35, call 2 of 2: the record (as s34r.sh) on the tree s35c.sh checked; with FLEXATTN_SM90_ROW_ORDER=0 when
# s35c.sh left a failing verdict (then the default goes back to 0 in the tree before the record is committed).
. "$(dirname "$0")/lib.sh"
out_dir s35r; L=$O
deadline ${S35R_DEADLINE:-560}
nvidia-smi --query-gpu=name --format=csv,noheader
if [ "$(cat build-gpu/row_order_verdict 2>/dev/null)" = 1 ]; then export FLEXATTN_SM90_ROW_ORDER=0; echo "row order 0"; fi
BUILD_PY=ON build_gpu $O flexattn _C
record_suites
record_hd96
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
