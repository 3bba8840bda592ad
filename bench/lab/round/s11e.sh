#!/usr/bin/env bash
# Session 11: one entry function for both backward kernels (bwd_entry: on interior tiles without a score_mod
# the scale folds into the exp2's FFMA, as the v2 and the forward do) on top of s11d's interior partial tiles and
# __ldg mask tables. (1) gpu_attention_check --quick and run --check (document + causal D=64, odd lengths);
# (2) if they pass, the record run (rec8.sh: --suite long --backward, all peers; --suite decode).
. "$(dirname "$0")/lib.sh"
out_dir s11e; L=$O
mkdir -p $OUT/bench
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=ON -DFLEXATTN_BUILD_TESTS=ON > $O/configure.log 2>&1
cmake --build build-gpu -j16 --target gpu_attention_check flexattn _C > $O/build.log 2>&1 || { grep -E "error" $O/build.log | head -20; exit 1; }
echo "build $(el) s"
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
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
timeout 330 python3 bench/run.py --suite long --backward --no-warm --reps 20 --out $OUT/bench/long > $OUT/bench/long.log 2>&1
echo "long rc=$? ($(el) s)"
timeout 90 python3 bench/run.py --suite decode --out $OUT/bench/decode > $OUT/bench/decode.log 2>&1
echo "decode rc=$? ($(el) s)"
grep -E "^\|" $OUT/bench/long.log | tail -18 | cut -d'|' -f2,4,6,7,8,10,11,12,14,15
grep -E "^\| flexattn" $OUT/bench/decode.log | head -8
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
