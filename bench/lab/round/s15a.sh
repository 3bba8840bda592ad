#!/usr/bin/env bash
# Session 15 round 1: (a) where a masked variant's cold first call spends its time (bench/lab/s15/compile_probe.py,
# one process per measurement, each in a new kernel cache, NVRTC compiles logged); (b) the constant relative bias
# with a causal mask in the backward at D = 128, which compiles four times locally and still spills 128 bytes
# (ptxas 13.0): B=2 H=16 S=8192 forward + backward ms beside causal alone and relbias alone. ~4 min.
. "$(dirname "$0")/lib.sh"
out_dir s15a; L=$O
deadline 420
BUILD_PY=ON build_gpu $O flexattn _C
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python:$PWD/bench
probe() {  # probe CASE D MODE
  FLEXATTN_CACHE_DIR=$(mktemp -d /tmp/cp.XXXX) FLEXATTN_JIT_DEBUG=1 timeout $(cap 60 5) \
    python3 bench/lab/s15/compile_probe.py "$@" 2>> $O/probe_jit.log | tee -a $O/probe.log
}
for c in full causal sliding1024 document; do for m in alone beside bwd; do probe $c 128 $m; done; done
for m in alone beside; do probe document 64 $m; probe sliding1024 64 $m; done
echo "probe done $(el) s"
run_one() {  # run_one NAME ARGS...
  local n=$1; shift
  FLEXATTN_JIT_DEBUG=1 timeout $(cap 90 5) $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D 128 --backward "$@" > $O/run_$n.log 2>&1
  echo "$n fwd $(ms_of $O/run_$n.log forward) bwd $(ms_of $O/run_$n.log backward) compiles $(grep -c 'jit\] compiled' $O/run_$n.log)"
}
run_one causal --mask causal
run_one relbias --score relbias:const
run_one relbias_causal --score relbias:const --mask causal
run_one relbias_l_causal --score relbias --mask causal
run_one relbias_l --score relbias
echo "total $(el) s"
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
