#!/usr/bin/env bash
# Session 18 round 8 (issue 6): the two dQ writers, landing checks: the Python GPU suite's backward and deterministic
# tests against torch flex (pytest -k "backward or deterministic or grad"), and compute-sanitizer memcheck on two
# deterministic backward calls (D=128 causal, D=64 document) through the CLI.
. "$(dirname "$0")/lib.sh"
out_dir s18h; L=$O
deadline 330
BUILD_PY=ON build_gpu $O flexattn _C
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
timeout $(cap 150 20) python3 -m pytest -q -p no:cacheprovider tests/python/gpu/test_gpu_vs_torch.py \
  -k "backward or deterministic or grad" > $O/pytest.log 2>&1; echo "pytest rc=$? ($(el) s)"; tail -3 $O/pytest.log
timeout $(cap 60 5) compute-sanitizer --tool memcheck $F run --backend cuda --dtype bf16 -B 1 -H 2 -Q 1000 -D 128 \
  --mask causal --backward --deterministic > $O/memcheck1.log 2>&1
echo "memcheck causal D=128 det rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' $O/memcheck1.log)"
timeout $(cap 60 5) compute-sanitizer --tool memcheck $F run --backend cuda --dtype bf16 -B 2 -H 4 -Q 300 -D 64 \
  --mask document:3 --backward --deterministic > $O/memcheck2.log 2>&1
echo "memcheck document D=64 det rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' $O/memcheck2.log)"
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
