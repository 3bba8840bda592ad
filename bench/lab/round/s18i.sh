#!/usr/bin/env bash
# Session 18 round 9 (issue 6): the review's fix (a __syncwarp before the first end marker's hand-back in the dQ
# writer), checked: gpu_attention_check --deterministic (bitwise repeats inside) and --quick --deterministic.
. "$(dirname "$0")/lib.sh"
out_dir s18i; L=$O
deadline 300
build_gpu $O gpu_attention_check
timeout $(cap 150 10) $CHECK --deterministic > $O/det_all.log 2>&1
echo "check --deterministic rc=$? $(pass_fail $O/det_all.log) ($(el) s)"; grep ^FAIL $O/det_all.log | head -3
FLEXATTN_SM90_BWD_V3=0 timeout $(cap 90 10) $CHECK --quick --deterministic > $O/det_v3off.log 2>&1
echo "check --quick --deterministic, V3=0 (per-row bulk dQ, two writers without the rank warm-up) rc=$? $(pass_fail $O/det_v3off.log) ($(el) s)"
grep ^FAIL $O/det_v3off.log | head -3
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
