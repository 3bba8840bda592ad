#!/usr/bin/env bash
# Session 8: deterministic backward by ordered dQ reductions. (1) correctness: gpu_attention_check --quick (100 cases,
# 10 of them deterministic over full / causal / document / sliding / relbias, each run twice bitwise), memcheck on two deterministic
# cases; (2) speed and
# bitwise reproducibility at B=2 H=16 S=8192 (det8.py, the Python package against itself).
. "$(dirname "$0")/lib.sh"
out_dir det8; L=$O
build_gpu $O gpu_attention_check flexattn
cmake -S . -B build-gpu -DFLEXATTN_BUILD_PYTHON=ON > $O/configure_py.log 2>&1
cmake --build build-gpu -j16 --target _C > $O/build_py.log 2>&1 || { grep error $O/build_py.log | head; }
echo "build py $(el) s"
timeout 200 $CHECK --quick > $O/check_quick.log 2>&1; echo "check --quick rc=$? $(pass_fail $O/check_quick.log) ($(el) s)"
grep ^FAIL $O/check_quick.log | head -5
grep " det" $O/check_quick.log | head -12
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
timeout ${PY_BUDGET:-200} python3 bench/lab/round/det8.py > $O/det8.log 2>&1; echo "det8.py rc=$? ($(el) s)"
tail -3 $O/det8.log | grep -v ^row
timeout 60 compute-sanitizer --tool memcheck $F run --backend cuda --dtype bf16 -B 1 -H 2 -Q 1000 -D 128 --mask causal \
  --backward --deterministic > $O/memcheck1.log 2>&1; echo "memcheck causal det rc=$? $(grep -c 'ERROR SUMMARY: 0' $O/memcheck1.log)"
timeout 60 compute-sanitizer --tool memcheck $F run --backend cuda --dtype bf16 -B 2 -H 4 -Q 300 -D 64 --mask document:3 \
  --backward --deterministic > $O/memcheck2.log 2>&1; echo "memcheck doc D=64 det rc=$? $(grep -c 'ERROR SUMMARY: 0' $O/memcheck2.log)"
echo "== B=2 H=16 S=8192 bf16 backward, default vs deterministic"
grep ^row $O/det8.log | cut -c5-
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
