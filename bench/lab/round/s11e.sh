#!/usr/bin/env bash
# Session 11: one entry function for both backward kernels (bwd_entry: on interior tiles without a score_mod
# the scale folds into the exp2's FFMA, as the v2 and the forward do) on top of s11d's interior partial tiles and
# __ldg mask tables. (1) gpu_attention_check --quick and run --check (document + causal D=64, odd lengths);
# (2) if they pass, the record run (rec8.sh: --suite long --backward, all peers; --suite decode; its own tarball).
. "$(dirname "$0")/lib.sh"
out_dir s11e; L=$O
BUILD_PY=ON build_gpu $O gpu_attention_check flexattn _C
timeout 150 $CHECK --quick > $O/check.log 2>&1; rc=$?; echo "check --quick rc=$rc $(pass_fail $O/check.log) ($(el) s)"; grep ^FAIL $O/check.log | head -3
python3 -c "import numpy as np; np.save('$O/doc.npy', (np.arange(4097) * 7 // 4097).astype(np.int32))"
for Lq in 17 1000 4097; do
  timeout 60 $F run --backend cuda --check --backward --dtype bf16 -B 2 -H 4 -Q $Lq -D 64 \
    --mask-expr "doc_ids[q_idx] == doc_ids[kv_idx] && q_idx >= kv_idx" --buffer doc_ids=$O/doc.npy > $O/run_doc_$Lq.log 2>&1
  r=$?; rc=$((rc | r)); echo "run --check doc D=64 L=$Lq rc=$r"
  timeout 60 $F run --backend cuda --check --backward --dtype f16 -B 1 -H 4 --hkv 2 -Q $Lq -D 64 --mask causal > $O/run_causal_$Lq.log 2>&1
  r=$?; rc=$((rc | r)); echo "run --check causal D=64 GQA L=$Lq rc=$r"
done
[ $rc = 0 ] || { echo "correctness failed: no record run"; (cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); exit 1; }
bash "$(dirname "$0")/rec8.sh"  # the record run
