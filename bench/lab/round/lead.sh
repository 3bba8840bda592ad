#!/usr/bin/env bash
# Lead's round-2 check (~90 s): the merged tree's defaults (fused exp2 FFMA in the sm90 forward, bulk dQ
# with its spill fallback, the helpers' default-path changes) on the quick attention check, then the
# forward/backward suite at D=128 and D=64 (B=4 H=16 S=2048).
. "$(dirname "$0")/lib.sh"
out_dir lead
timeout 60 $CHECK --quick > $O/check_quick.log 2>&1; echo "check --quick rc=$?"
grep "^FAIL" $O/check_quick.log | head -5; tail -1 $O/check_quick.log
timeout 25 $F bench --suite short --backend cuda > $O/short.log 2>&1; echo "short rc=$?"
timeout 25 $F bench --suite short64 --backend cuda > $O/short64.log 2>&1; echo "short64 rc=$?"
grep -v "^{" $O/short.log | tail -9; grep -v "^{" $O/short64.log | tail -8
