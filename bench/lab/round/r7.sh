#!/usr/bin/env bash
# Session 3 round 1: build everything (incl. _C), then the steps not yet run on a GPU since their last change:
# Python vs torch (issue 4), decode check (issue 7), CP check (issue 8). Later rounds reuse build-gpu if warm.
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/logs
export GPU_TEST_ONLY="${ONLY:-python_gpu gpu_decode gpu_cp}"
OUT=$OUT/logs timeout ${BUDGET:-560} scripts/gpu_test.sh > $OUT/logs/gpu_test.out 2>&1; echo "gpu_test rc=$?" >> $OUT/logs/gpu_test.out
for f in $OUT/logs/*.log; do case $f in *build.log|*configure.log) ;; *) echo "== $(basename $f)"; grep -E '^(FAIL|E  )|passed|failed|error' $f | tail -6;; esac; done
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $OUT/logs/*.log
tail -25 $OUT/logs/gpu_test.out
