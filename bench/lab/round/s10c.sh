#!/usr/bin/env bash
# Session 10, second round: (1) where the Python forward's ~200 us of host time per call goes (host_profile.py);
# (2) gpu_attention_check --quick with the backward's grouped launch order on by default for masked and
# deterministic calls (FLEXATTN_SM90_BWD_HEAD_GROUPS unset = auto); (3) backward ms B=2 H=16 S=8192 D=128, auto vs 0,
# causal / document / full (full: auto = the grid's own order unless deterministic).
. "$(dirname "$0")/lib.sh"
out_dir s10c; L=$O
BUILD_PY=ON build_gpu $O gpu_attention_check flexattn _C
(export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python
 cd bench/lab/round && timeout 120 python3 host_profile.py document causal alibi_causal > $O/host_profile.log 2>&1; echo "host_profile rc=$? ($(el) s)")
grep "^==" $O/host_profile.log
timeout 200 $CHECK --quick > $O/check.log 2>&1; echo "check --quick rc=$? $(pass_fail $O/check.log) ($(el) s)"
grep ^FAIL $O/check.log | head -3
python3 -c "import numpy as np, sys; sys.path.insert(0, 'bench'); import bench_cases as bc; np.save('$O/doc.npy', np.array(bc.doc_ids(8192), dtype=np.int32))"
one() {  # groups case tag extra-args...
  local g=$1 m=$2 tag=$3; shift 3
  local a=(); case $m in causal) a=(--mask causal) ;; full) ;;
    document) a=(--mask-expr "doc_ids[q_idx] == doc_ids[kv_idx] && q_idx >= kv_idx" --buffer doc_ids=$O/doc.npy) ;; esac
  env FLEXATTN_SM90_BWD_HEAD_GROUPS=$g timeout 60 $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D 128 "${a[@]}" --backward "$@" > $O/${g}_${m}${tag}.log 2>&1
}
for m in causal document full; do for g in auto 0; do one $g $m _b; one $g $m _d --deterministic; done; done
echo "== B=2 H=16 S=8192 D=128 backward ms, HEAD_GROUPS auto (new default) / 0 ($(el) s)"
for m in causal document full; do
  echo "$m: default $(ms_of $O/auto_${m}_b.log backward) / $(ms_of $O/0_${m}_b.log backward)  det $(ms_of $O/auto_${m}_d.log backward) / $(ms_of $O/0_${m}_d.log backward)"
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
