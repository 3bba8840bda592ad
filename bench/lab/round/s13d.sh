#!/usr/bin/env bash
# Session 13, last call: round 3's f16 relbias check (its command line was wrong), D=64 / causal relbias checks, then
# the record run on the committed tree (bench/run.py --suite long --backward and --suite decode, all peers). ~5.5 min.
. "$(dirname "$0")/lib.sh"
out_dir s13d; L=$O
deadline 560
BUILD_PY=ON build_gpu $O gpu_attention_check flexattn _C
ok=0; bad=0
chk() { if timeout 60 $F run --backend cuda --check -B 1 -H 4 "$@" > $O/run.log 2>&1; then ok=$((ok+1)); else bad=$((bad+1)); echo "FAIL run $*"; tail -3 $O/run.log; fi; }
chk -Q 777 -D 128 --dtype f16 --score relbias --mask causal
chk -Q 1000 -D 64 --dtype bf16 --score relbias --mask causal --hkv 2
chk -Q 4097 -D 64 --dtype f16 --score relbias
echo "run --check: $ok ok, $bad failed ($(el) s)"
mkdir -p $OUT/bench
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
timeout $(cap 330 30) python3 bench/run.py --suite long --backward --no-warm --reps 20 --out $OUT/bench/long > $OUT/bench/long.log 2>&1
echo "long rc=$? ($(el) s)"
timeout $(cap 90 10) python3 bench/run.py --suite decode --out $OUT/bench/decode > $OUT/bench/decode.log 2>&1
echo "decode rc=$? ($(el) s)"
grep -E "^\|" $OUT/bench/long.log | tail -18 | cut -d'|' -f2,4,6,7,8,10,11,12,14,15
grep -E "^\| flexattn" $OUT/bench/decode.log | head -3
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
