#!/usr/bin/env bash
# Session-2 device round 1: _C segfault diagnostics, sm90 quick check, full make gpu-test, cli bench.
. "$(dirname "$0")/lib.sh"
L=$OUT/logs; mkdir -p $L
stamp start
{ python3 --version; ldd --version | head -1; pip show nanobind 2>/dev/null | head -2; python3 -c "import sys; print(sys.executable)"; which python3; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv; } > $L/env.log 2>&1
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=ON > $L/configure.log 2>&1 || stamp configure-failed
cmake --build build-gpu -j16 --target gpu_attention_check gpu_block_mask_check flexattn _C > $L/build.log 2>&1 || { stamp build-failed; grep -m20 error $L/build.log; }
stamp built
cat > /tmp/diag.py <<'PY'
import faulthandler, sys, glob, importlib.util
faulthandler.enable()
p = glob.glob('build-gpu/bindings/_C*.so')[0]
print("loading", p, flush=True)
spec = importlib.util.spec_from_file_location("flexattn._C", p)
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
print("loaded; attrs", len(dir(m)), flush=True)
print("version", getattr(m, "__version__", None), flush=True)
print("cuda_available", m.cuda_available(), flush=True)
PY
timeout 60 python3 /tmp/diag.py > $L/diag_plain.log 2>&1; echo "rc=$?" >> $L/diag_plain.log
stamp "diag plain rc=$(tail -1 $L/diag_plain.log)"
if ! grep -q "cuda_available (True" $L/diag_plain.log; then
  OPENBLAS_NUM_THREADS=1 timeout 60 python3 /tmp/diag.py > $L/diag_env.log 2>&1; echo "rc=$?" >> $L/diag_env.log
  timeout 100 cuda-gdb -batch -ex run -ex bt -ex "info sharedlibrary" --args python3 /tmp/diag.py > $L/diag_gdb.log 2>&1
  stamp "gdb done"
fi
FLEXATTN_SM90=1 FLEXATTN_JIT_DEBUG=1 timeout 90 $CHECK --quick > $L/sm90_quick.log 2>&1
stamp "sm90 quick rc=$?"
OUT=$L GPU_TEST_PYTHON=1 timeout 240 scripts/gpu_test.sh > $L/gpu_test_summary.log 2>&1
stamp "gpu_test rc=$?"
[ $(el) -lt 470 ] && timeout 50 $F bench --suite short --backend cuda > $L/bench_sm80.log 2>&1
stamp "bench sm80 rc=$?"
[ $(el) -lt 530 ] && FLEXATTN_SM90=1 timeout 50 $F bench --suite short --backend cuda > $L/bench_sm90.log 2>&1
stamp "bench sm90 rc=$?"
tar czf $OUT/logs.tgz -C $OUT logs
echo ==== diag; tail -5 $L/diag_plain.log; grep -A12 "^#0\|received signal" $L/diag_gdb.log 2>/dev/null | head -30
echo ==== sm90; tail -8 $L/sm90_quick.log
echo ==== gpu_test; tail -12 $L/gpu_test_summary.log
echo ==== bench; tail -12 $L/bench_sm80.log; tail -12 $L/bench_sm90.log
cat $L/steps.log
