#!/usr/bin/env bash
# Session 27 round 2: the tree with one backward tile-kind dispatcher (SASS-equal locally) and SOFTCAP_RCP=8 by
# default at D=64 (s27a on an H100: D=64 softcap + causal 1.207 -> 1.042 ms). The full gpu_attention_check (every
# mod, length, head dim, GQA, backward), the softcap cases with the reciprocal on each pipe, the softcap A/B on this
# card, then memcheck on the quick set until the deadline.
. "$(dirname "$0")/lib.sh"
out_dir s27b; L=$O
deadline ${S27B_DEADLINE:-560}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
timeout $(cap 220 10) $CHECK > $O/check_full.log 2>&1
echo "check (full) rc=$? $(pass_fail $O/check_full.log) ($(el) s)"; grep ^FAIL $O/check_full.log | head -5
for k in 0 8; do
  FLEXATTN_SM90_SOFTCAP_RCP=$k timeout $(cap 50 10) $CHECK --only softcap > $O/check_softcap$k.log 2>&1
  echo "check --only softcap RCP=$k rc=$? $(pass_fail $O/check_softcap$k.log) ($(el) s)"; grep ^FAIL $O/check_softcap$k.log | head -3
done
fwd_sweep FLEXATTN_SM90_SOFTCAP_RCP "0 8" softcap_causal
timeout $(cap 300 1) compute-sanitizer --tool memcheck --error-exitcode 3 $CHECK --quick > $O/memcheck.log 2>&1
echo "memcheck --quick rc=$? $(pass_fail $O/memcheck.log) ($(el) s)"; grep -m3 "Invalid\|ERROR SUMMARY" $O/memcheck.log
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
