#!/usr/bin/env bash
# Session 11's first call: correctness of the two paths no GPU had run (persistent auto with ALiBi's affine bias at
# D=64; deterministic dense calls on their grouped-order set), then persistent auto: --quick and the long suite,
# flexattn only, unset vs auto (persistent_ab). One build, ~7 min.
. "$(dirname "$0")/lib.sh"
out_dir s11c; L=$O
BUILD_PY=ON build_gpu $O gpu_attention_check flexattn _C
timeout 90 $CHECK --quick --deterministic > $O/det.log 2>&1
echo "--quick --deterministic rc=$? $(pass_fail $O/det.log) ($(el) s)"; grep ^FAIL $O/det.log | head -3
FLEXATTN_SM90_BWD_PERSISTENT=auto timeout 200 $CHECK --quick > $O/check.log 2>&1; echo "check --quick auto rc=$? $(pass_fail $O/check.log) ($(el) s)"
grep ^FAIL $O/check.log | head -3
persistent_ab
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
