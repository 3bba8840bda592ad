#!/usr/bin/env bash
# Session 13, first call: session 12's last change (the TMA-store epilogue as a define dropped on spill) had not run.
# --quick on relbias / causal / document, then the record run (rec8.sh's bench: --suite long --backward, all peers,
# and --suite decode) into $OUT/bench. ~6.5 min.
. "$(dirname "$0")/lib.sh"
out_dir s13a; L=$O
deadline 540
BUILD_PY=ON build_gpu $O gpu_attention_check flexattn _C
timeout $(cap 70 5) $CHECK --quick --only relbias --only causal --only document > $O/check.log 2>&1; echo "check rc=$? $(pass_fail $O/check.log) ($(el) s)"
grep ^FAIL $O/check.log | head -3
mkdir -p $OUT/bench
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
timeout $(cap 330 30) python3 bench/run.py --suite long --backward --no-warm --reps 20 --out $OUT/bench/long > $OUT/bench/long.log 2>&1
echo "long rc=$? ($(el) s)"
timeout $(cap 90 10) python3 bench/run.py --suite decode --out $OUT/bench/decode > $OUT/bench/decode.log 2>&1
echo "decode rc=$? ($(el) s)"
grep -E "^\|" $OUT/bench/long.log | tail -18 | cut -d'|' -f2,4,6,7,8,10,11,12,14,15
grep -E "^\| flexattn" $OUT/bench/decode.log | head -8
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
