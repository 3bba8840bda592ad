#!/usr/bin/env bash
# Session 44: FLEXATTN_DECODE_TMA is the default. gpu_decode_check with the defaults (whole, alone: s44b's three side
# by side stopped at ~205 of 229 in 70 s), then the H200 record (record_suites, record_hd96) while the deadline allows.
. "$(dirname "$0")/lib.sh"
out_dir s44r; L=$O
deadline ${S44R_DEADLINE:-560}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C gpu_decode_check
dchecks 80 default:FLEXATTN_JIT_DEBUG=1
echo "tma fallbacks: $(grep -c 'not TMA' $O/dcheck_default.log) ($(grep 'not TMA' $O/dcheck_default.log | sort | uniq -c | head -3))"
# The decode suite first (issue 7's numbers), then lib.sh's record_suites / record_hd96 with the time left.
mkdir -p $OUT/bench
python_env
timeout $(cap 90 10) python3 bench/run.py --suite decode --out $OUT/bench/decode0 > $OUT/bench/decode0.log 2>&1
echo "decode0 rc=$? ($(el) s)"; grep -E "^\| (flexattn|sdpa-cudnn)" $OUT/bench/decode0.log | head -12
[ "$(left)" -ge 200 ] && record_suites
record_hd96
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
