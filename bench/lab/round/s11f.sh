#!/usr/bin/env bash
# Session 11: the sm80 backward's interior tiles without bounds tests (as the sm90 first kernel's, s11d: document
# D=64 x1.8 there). The sm80 backward runs on the H200 for D=256 and with FLEXATTN_SM90_BWD=0. (1) --quick with
# FLEXATTN_SM90_BWD=0 (every mod on the sm80 backward); (2) backward ms before (657d2a3's attn_bwd_sm80.cuh in a
# copy of the tree) / after, B=2 H=16 S=8192 bf16: document D=64 and 128, causal D=128 (sm80 forced), causal D=256.
. "$(dirname "$0")/lib.sh"
out_dir s11f; L=$O
build_gpu $O gpu_attention_check flexattn
FLEXATTN_SM90_BWD=0 timeout 150 $CHECK --quick > $O/check.log 2>&1; echo "check --quick SM90_BWD=0 rc=$? $(pass_fail $O/check.log) ($(el) s)"; grep ^FAIL $O/check.log | head -3
rm -rf /tmp/old && mkdir /tmp/old && tar cf - --exclude=./build-gpu --exclude=./build --exclude=./.git . | tar xf - -C /tmp/old
if git show 657d2a3:kernels/sm80/attn_bwd_sm80.cuh > /tmp/old/kernels/sm80/attn_bwd_sm80.cuh 2>/dev/null; then
  (cd /tmp/old && cmake -S . -B build-old -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=OFF > $O/configure_old.log 2>&1 &&
   cmake --build build-old -j16 --target flexattn > $O/build_old.log 2>&1) && OLD=/tmp/old/build-old/tools/flexattn
  echo "old build ${OLD:+ok} ($(el) s)"
else echo "no git history on this copy: no before"; fi
python3 -c "import numpy as np, sys; sys.path.insert(0, 'bench'); import bench_cases as bc; np.save('$O/doc.npy', np.array(bc.doc_ids(8192), dtype=np.int32))"
one() {  # binary tag D mask env...
  local bin=$1 tag=$2 d=$3 m=$4; shift 4
  local a=(--mask causal); [ $m = document ] && a=(--mask-expr "doc_ids[q_idx] == doc_ids[kv_idx] && q_idx >= kv_idx" --buffer doc_ids=$O/doc.npy)
  env "$@" FLEXATTN_CACHE_DIR=/tmp/cache_$tag timeout 90 $bin run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D $d "${a[@]}" --backward > $O/${tag}_${m}_$d.log 2>&1
}
echo "== backward ms B=2 H=16 S=8192, before / after"
for c in "64 document FLEXATTN_SM90_BWD=0" "128 document FLEXATTN_SM90_BWD=0" "128 causal FLEXATTN_SM90_BWD=0" "256 causal X=1"; do
  set -- $c
  [ -n "${OLD:-}" ] && one $OLD old $1 $2 $3; one $F new $1 $2 $3
  echo "$2 D=$1 ($3): $([ -n "${OLD:-}" ] && ms_of $O/old_$2_$1.log backward) / $(ms_of $O/new_$2_$1.log backward)"
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
