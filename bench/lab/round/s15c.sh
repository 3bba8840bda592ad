#!/usr/bin/env bash
# Session 15 round 3: round 2 had the constant relbias backward at D = 128 slower (6.137 ms, session-15 round 1
# 5.754) while relbias + causal went 4.011 -> 3.094. Which part: the gather (FLEXATTN_SM90_GATHER=0 restores the
# general form, whose kernel then spills with the TMA-store epilogue and drops it) or the TMA-store epilogue the
# gather kernel now keeps (FLEXATTN_SM90_BWD_TMA_STORE=0)? B=2 H=16 S=8192 D=128, each config twice, alternating.
. "$(dirname "$0")/lib.sh"
out_dir s15c; L=$O
deadline 400
build_gpu $O flexattn
run_one() {  # run_one NAME ENV ARGS...
  local n=$1 e=$2; shift 2
  env $e timeout $(cap 90 5) $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D 128 --backward "$@" > $O/run_$n.log 2>&1
  echo "$n fwd $(ms_of $O/run_$n.log forward) bwd $(ms_of $O/run_$n.log backward)"
}
for r in 1 2; do
  run_one relbias_default X=1 --score relbias:const
  run_one relbias_notma FLEXATTN_SM90_BWD_TMA_STORE=0 --score relbias:const
  run_one relbias_nogather FLEXATTN_SM90_GATHER=0 --score relbias:const
  run_one relbias_nogather_notma "FLEXATTN_SM90_GATHER=0 FLEXATTN_SM90_BWD_TMA_STORE=0" --score relbias:const
  run_one rc_default X=1 --score relbias:const --mask causal
  run_one rc_notma FLEXATTN_SM90_BWD_TMA_STORE=0 --score relbias:const --mask causal
  run_one full_default X=1
  run_one full_notma FLEXATTN_SM90_BWD_TMA_STORE=0
done
echo "total $(el) s"
