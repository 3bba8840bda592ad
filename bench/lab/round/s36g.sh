#!/usr/bin/env bash
# Session 36: `make gpu-test` steps on this tree (c523e8b's programmatic-launch helper and session 35's defaults have
# run only subsets): GPU_TEST_ONLY names them (default: the main attention run, decode, cp, the Python suite), the whole
# script capped at S36G_CAP seconds; the summary table (or, when the cap cut it, each step's log tail) prints last.
cap=${S36G_CAP:-570}
export GPU_TEST_ONLY=${GPU_TEST_ONLY:-"gpu_attention gpu_decode gpu_decode_no_merge gpu_cp python_gpu"}
export GPU_TEST_MEMCHECK=${GPU_TEST_MEMCHECK:-0}
nvidia-smi --query-gpu=name --format=csv,noheader
timeout $cap scripts/gpu_test.sh > ${OUT:-/tmp}/gpu_test.out 2>&1; rc=$?
echo "gpu_test rc=$rc"
tail -25 ${OUT:-/tmp}/gpu_test.out
for f in ${OUT:-/tmp}/gpu_*.log ${OUT:-/tmp}/python_gpu.log; do [ -f "$f" ] && echo "== $(basename $f): $(tail -1 $f)"; done
