#!/usr/bin/env bash
# Round 2: backtrace of the _C segfault after torch initialised CUDA; full sm90 correctness check.
. "$(dirname "$0")/lib.sh"
L=$OUT/logs; mkdir -p $L
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=ON > $L/configure.log 2>&1
cmake --build build-gpu -j16 --target gpu_attention_check > $L/build.log 2>&1 || stamp build-failed
stamp built-release
( FLEXATTN_SM90=1 timeout 420 $CHECK > $L/sm90_full.log 2>&1; echo "rc=$?" >> $L/sm90_full.log ) &
cmake -S . -B build-dbg -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_TESTS=OFF -DFLEXATTN_BUILD_PYTHON=ON > $L/configure_dbg.log 2>&1
cmake --build build-dbg -j12 --target _C > $L/build_dbg.log 2>&1 || stamp build-dbg-failed
stamp built-dbg
for mode in import init; do
cat > /tmp/diag_$mode.py <<PY
import faulthandler, sys, glob, importlib.util
faulthandler.enable()
import torch
if "$mode" == "init": print("torch cuda", torch.cuda.is_available(), flush=True)
p = glob.glob('build-dbg/bindings/_C*.so')[0]
spec = importlib.util.spec_from_file_location("flexattn._C", p)
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
print("loaded", flush=True)
print("cuda_available", m.cuda_available(), flush=True)
PY
timeout 60 python3 /tmp/diag_$mode.py > $L/diag_$mode.log 2>&1; echo "rc=$?" >> $L/diag_$mode.log
stamp "diag $mode $(tail -1 $L/diag_$mode.log)"
done
timeout 200 cuda-gdb -batch -ex "set pagination off" -ex run -ex bt -ex "info registers rip" -ex "x/6i \$pc-12" --args python3 /tmp/diag_init.py > $L/diag_gdb.log 2>&1
stamp "gdb done"
grep -E "libcuda|libnvrtc|libcudart" /proc/self/maps >/dev/null
wait
stamp "sm90 full $(tail -1 $L/sm90_full.log)"
tar czf $OUT/logs.tgz -C $OUT logs
echo ==== gdb; grep -B2 -A25 "received signal" $L/diag_gdb.log | head -60
echo ==== sm90; grep -v "^PASS" $L/sm90_full.log | tail -15
cat $L/steps.log
