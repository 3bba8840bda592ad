#!/usr/bin/env bash
# Session 40: the whole `make gpu-test` in as few device calls as possible: steps run GPU_TEST_PARALLEL at a time
# (default 4), the script capped at S40G_CAP seconds. Steps named in S40G_SKIP are left out (they passed in an earlier
# call on this tree). Every step's result prints last; a step without one did not finish under the cap. Exits with
# gpu_test.sh's status (124 when the cap cut it).
cap=${S40G_CAP:-560}
export GPU_TEST_PARALLEL=${GPU_TEST_PARALLEL:-4}
export OUT=${OUT:-/tmp/s40g}  # gpu_test.sh writes its logs and step results there
mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
all=$(grep -oE 'run [a-z0-9_]+ ' scripts/gpu_test.sh | awk '{print $2}' | grep -E '^(gpu_|memcheck|python_)' | awk '!seen[$0]++')
if [ -n "${S40G_SKIP:-}" ]; then
  export GPU_TEST_ONLY=$(for s in $all; do [[ " $S40G_SKIP " == *" $s "* ]] || echo -n "$s "; done)
  # (an empty GPU_TEST_ONLY means every step to gpu_test.sh)
  [ -n "${GPU_TEST_ONLY// /}" ] || { echo "S40G_SKIP names every step: nothing to run"; exit 0; }
fi
echo "steps: ${GPU_TEST_ONLY:-all}"
t0=$(date +%s)
timeout $cap scripts/gpu_test.sh > $OUT/gpu_test.out 2>&1; rc=$?
echo "gpu_test rc=$rc ($(( $(date +%s) - t0 )) s)"
grep -h "^FAIL" $OUT/gpu_*.log $OUT/memcheck*.log 2>/dev/null | head -20
for s in ${GPU_TEST_ONLY:-$all}; do
  parts=$(cd $OUT && ls ${s}_[0-9]*.ids ${s}_collect.result 2>/dev/null | sed -E 's/\.(ids|result)$//')  # python_gpu's
  for p in ${parts:-$s}; do
    if [ -f $OUT/$p.result ]; then r=$(cat $OUT/$p.result); else r="unfinished"; fi
    printf '%-34s %-12s %s\n' "$p" "$r" "$( [ -f $OUT/$p.log ] && tail -1 $OUT/$p.log | cut -c1-90)"
  done
done
grep -hE "^(FAILED|ERROR) " $OUT/python_gpu*.log 2>/dev/null | head -20
# Too many files do not come back from the device: one archive of every log and result instead.
(cd $OUT && tar czf gpu_test_logs.tgz --exclude=gpu_test_logs.tgz . && find . -type f ! -name gpu_test_logs.tgz -delete)
exit $rc
