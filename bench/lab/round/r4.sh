#!/usr/bin/env bash
# Round 4: python GPU suite (head-dim padding fix), host-overhead probe, CLI bench at S=8192 (sm90 fwd).
. "$(dirname "$0")/lib.sh"
L=$OUT/logs; mkdir -p $L
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=ON > $L/configure.log 2>&1
cmake --build build-gpu -j16 --target flexattn _C > $L/build.log 2>&1 || { stamp build-failed; grep -m20 error $L/build.log; }
stamp built
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/python/gpu tests/python/test_native_torch.py > $L/python_gpu.log 2>&1
stamp "python gpu rc=$?"
(cd bench && timeout 120 python3 lab/round/host_probe.py > $L/probe.log 2>&1); stamp "probe rc=$?"
timeout 150 $F bench --suite full --backend cuda > $L/bench_full.log 2>&1
stamp "bench full rc=$?"
tar czf $OUT/logs.tgz -C $OUT logs
echo ==== python; grep -E "passed|failed|FAILED" $L/python_gpu.log | tail -5
echo ==== probe; cat $L/probe.log | tail -12
echo ==== bench; tail -20 $L/bench_full.log
cat $L/steps.log
