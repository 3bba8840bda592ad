#!/usr/bin/env bash
# Session 26 round 2 (after s26a): why alibi_causal D=128's cold compile_s was 2.30 s (forward 1.28 s; session 22:
# 1.86) while every other row stayed <= 2 s. Two cold runs of alibi_causal and causal with the JIT's events
# (FLEXATTN_JIT_DEBUG=1: every compile, its key and ms); then memcheck on the rotated loop (never run under it).
. "$(dirname "$0")/lib.sh"
out_dir s26b; L=$O
deadline ${S26B_DEADLINE:-175}
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
export FLEXATTN_SM90_ROTATED=1 FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python
for i in 1 2; do
  rm -rf $O/cache$i
  FLEXATTN_JIT_DEBUG=1 timeout $(cap 45 10) python3 bench/run.py --suite long --impls flexattn --cases alibi_causal,causal \
    --backward --no-warm --reps 20 --cache-dir $O/cache$i --out $O/run$i > $O/run$i.log 2>&1
  echo "run $i rc=$? ($(el) s)"
  grep "compiled" $O/run$i.log | sed 's/.*compiled //' | head -12
  grep -E "^\| (alibi|causal)" $O/run$i.log | cut -d'|' -f2,4,16
done
[ "${S26B_MEMCHECK:-1}" = 1 ] || { (cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); exit 0; }
timeout $(cap 90 1) compute-sanitizer --tool memcheck --error-exitcode 3 $CHECK --quick --only causal --only document > $O/memcheck.log 2>&1
echo "memcheck rotated --quick causal/document rc=$? $(pass_fail $O/memcheck.log) ($(el) s)"; grep -m3 "Invalid\|ERROR SUMMARY" $O/memcheck.log
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
