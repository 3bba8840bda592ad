#!/usr/bin/env bash
# Session 36: the H200 record of c523e8b (none since session 33's aa29e0b), after a short check of the tree (the PDL
# attribute refactor c523e8b ran only host tests): --quick on document / causal, one `run --check` with a backward.
. "$(dirname "$0")/lib.sh"
out_dir s36r; L=$O
deadline ${S36R_DEADLINE:-570}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C $( [ "${S36R_CHECK:-1}" = 1 ] && echo gpu_attention_check)
if [ "${S36R_CHECK:-1}" = 1 ]; then  # 0: the tree was checked in an earlier call (s36g.sh)
  timeout $(cap 45 5) $CHECK --quick --only document --only causal > $O/check.log 2>&1
  echo "check rc=$? $(pass_fail $O/check.log) ($(el) s)"; grep ^FAIL $O/check.log | head -3
  run_check --dtype bf16 -Q 1000 --mask document:3 --backward
  run_check_summary
fi
record_suites
record_hd96
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
