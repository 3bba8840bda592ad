#!/usr/bin/env bash
# Session 11, issue 6 (D=64 document backward): the interior partial tiles of the first backward kernel without the
# bounds test (mask_mod's loads no longer inside a per-entry branch) and buffer reads through __ldg (equal
# addresses loaded once per tile; also the forward's). (1) --quick, default and persistent auto; document / relbias
# at odd lengths; (2) the long suite fwd + bwd, flexattn only, default vs FLEXATTN_SM90_BWD_PERSISTENT=auto.
. "$(dirname "$0")/lib.sh"
out_dir s11d; L=$O
BUILD_PY=ON build_gpu $O gpu_attention_check flexattn _C
timeout 150 $CHECK --quick > $O/check.log 2>&1; echo "check --quick rc=$? $(pass_fail $O/check.log) ($(el) s)"; grep ^FAIL $O/check.log | head -3
FLEXATTN_SM90_BWD_PERSISTENT=auto timeout 150 $CHECK --quick --only document --only relbias --only alibi > $O/check_auto.log 2>&1
echo "check --quick auto doc/relbias/alibi rc=$? $(pass_fail $O/check_auto.log) ($(el) s)"; grep ^FAIL $O/check_auto.log | head -3
python3 -c "import numpy as np; np.save('$O/doc.npy', (np.arange(4097) * 7 // 4097).astype(np.int32))"
for Lq in 129 1000 4097; do for D in 64 128; do
  timeout 60 $F run --backend cuda --check --backward --dtype bf16 -B 2 -H 4 -Q $Lq -D $D \
    --mask-expr "doc_ids[q_idx] == doc_ids[kv_idx] && q_idx >= kv_idx" --buffer doc_ids=$O/doc.npy > $O/run_${Lq}_$D.log 2>&1
  echo "run --check doc L=$Lq D=$D rc=$? $(tail -1 $O/run_${Lq}_$D.log)"
done; done
persistent_ab
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
