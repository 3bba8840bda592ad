#!/usr/bin/env bash
# Session 10, round 4: the sm90 backward's affine ALiBi path (kernels/sm90/rel_affine_sm90.cuh; before: the
# bias per entry with an I2F, quarter rate like the exp2's MUFU: ALiBi + causal backward D=64 at half of causal's
# rate in the session-10 record run, 152 vs 304 TFLOP/s). (1) gpu_attention_check --quick (ALiBi cases);
# (2) flexattn run --check on ALiBi + causal D=64 / 128 with odd lengths (backward vs the CPU reference);
# (3) bench/run.py, flexattn only, alibi_causal and causal, forward + backward, D=128 and 64.
. "$(dirname "$0")/lib.sh"
out_dir s10e; L=$O
BUILD_PY=ON build_gpu $O gpu_attention_check flexattn _C
timeout 200 $CHECK --quick > $O/check.log 2>&1; echo "check --quick rc=$? $(pass_fail $O/check.log) ($(el) s)"
grep ^FAIL $O/check.log | head -3
for D in 64 128; do for Q in 1000 129 4097; do
  timeout 60 $F run --backend cuda --dtype bf16 -B 1 -H 4 -Q $Q -D $D --mask causal --score alibi --backward --check > $O/alibi_${D}_${Q}.log 2>&1
  echo "run --check alibi+causal D=$D L=$Q rc=$?"; grep -iE "fail|error" $O/alibi_${D}_${Q}.log | head -2
done; done
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python
timeout 200 python3 bench/run.py --suite long --backward --cases alibi_causal,causal --impls flexattn --no-warm --reps 20 \
  --out $O/bench > $O/bench.log 2>&1; echo "bench rc=$? ($(el) s)"
grep -E "^\|" $O/bench.log | tail -6
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
