#!/usr/bin/env bash
# Session 16 round 4: the sm90 backward's spill fallbacks as a list, a learnable relative bias with a mask compiling its
# next two candidates beside the first. `run --check --backward` on those variants (the kernels they end with are the
# same sources as before), then their cold first training step (bench/lab/s16/learnable_cold.py) in a fresh cache,
# with each compile's own time from FLEXATTN_JIT_DEBUG: wall time against the sum.
. "$(dirname "$0")/lib.sh"
out_dir s16d; L=$O
deadline 300
BUILD_PY=ON build_gpu $O flexattn _C
RUN_OK=0; RUN_BAD=0
for m in causal document:3 sliding_window:100; do run_check --dtype bf16 -Q 1000 -D 128 --score relbias --mask $m --backward; done
run_check --dtype bf16 -Q 777 -D 64 --score relbias --mask document:3 --backward
run_check_summary
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python
for c in causal document sliding; do
  FLEXATTN_CACHE_DIR=$(mktemp -d /tmp/lc.XXXX) FLEXATTN_JIT_DEBUG=1 timeout $(cap 60 5) \
    python3 bench/lab/s16/learnable_cold.py $c 2> $O/jit_$c.log | tee -a $O/cold.log
  echo "  compiles (ms): $(grep -o 'compiled attn_[a-z0-9_]*_d[0-9]*_dv[0-9]*_[0-9a-f]* for sm_90a in [0-9]* ms' $O/jit_$c.log | sed 's/.*attn_\([a-z]*\)_.* in \([0-9]*\) ms/\1 \2/' | paste -sd' ')"
  tail -2 $O/jit_$c.log | grep -i error
done
echo "total $(el) s"
