#!/usr/bin/env bash
# Session 10's last minutes of device time: correctness only of the two paths no GPU has run yet — the persistent
# backward with ALiBi's affine bias at D=64 (FLEXATTN_SM90_BWD_PERSISTENT=auto) and deterministic calls of dense
# variants on their grouped-order kernel set (the default since 3a4911f).
. "$(dirname "$0")/lib.sh"
out_dir s10g; L=$O
build_gpu $O gpu_attention_check
FLEXATTN_SM90_BWD_PERSISTENT=auto timeout 60 $CHECK --quick --only alibi --only causal > $O/auto.log 2>&1
echo "persistent=auto --quick alibi/causal rc=$? $(pass_fail $O/auto.log) ($(el) s)"; grep ^FAIL $O/auto.log | head -3
timeout 60 $CHECK --quick --deterministic > $O/det.log 2>&1
echo "--quick --deterministic rc=$? $(pass_fail $O/det.log) ($(el) s)"; grep ^FAIL $O/det.log | head -3
