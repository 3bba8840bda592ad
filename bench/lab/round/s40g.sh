#!/usr/bin/env bash
# Session 40: the whole `make gpu-test` in as few device calls as possible: steps run GPU_TEST_PARALLEL at a time
# (default 4), the script capped at S40G_CAP seconds. Steps named in S40G_SKIP are left out (they passed in an earlier
# call on this tree). Every step's result prints last; a step without one did not finish under the cap.
cap=${S40G_CAP:-560}
export GPU_TEST_PARALLEL=${GPU_TEST_PARALLEL:-4}
O=${OUT:-/tmp}
nvidia-smi --query-gpu=name --format=csv,noheader
all=$(grep -oE 'run [a-z0-9_]+ ' scripts/gpu_test.sh | awk '{print $2}' | grep -E '^(gpu_|memcheck|python_)' | awk '!seen[$0]++')
if [ -n "${S40G_SKIP:-}" ]; then
  export GPU_TEST_ONLY=$(for s in $all; do [[ " $S40G_SKIP " == *" $s "* ]] || echo -n "$s "; done)
fi
echo "steps: ${GPU_TEST_ONLY:-all}"
t0=$(date +%s)
timeout $cap scripts/gpu_test.sh > $O/gpu_test.out 2>&1; rc=$?
echo "gpu_test rc=$rc ($(( $(date +%s) - t0 )) s)"
grep -h "^FAIL" $O/gpu_*.log $O/memcheck*.log 2>/dev/null | head -20
for s in ${GPU_TEST_ONLY:-$all}; do
  if [ -f $O/$s.result ]; then r=$(cat $O/$s.result); else r="unfinished"; fi
  printf '%-34s %-12s %s\n' "$s" "$r" "$( [ -f $O/$s.log ] && tail -1 $O/$s.log | cut -c1-90)"
done
