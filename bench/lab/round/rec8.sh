#!/usr/bin/env bash
# Session 8: the record run of bench/results/h200-latest.json on the committed tree: bench/run.py --suite long --backward
# (B=2 H=16 S=8192, D=128 and 64, every case, all peers) and --suite decode, as session 6's final round (r19.sh).
. "$(dirname "$0")/lib.sh"
mkdir -p $OUT/bench
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=ON > $OUT/configure.log 2>&1
cmake --build build-gpu -j16 --target flexattn _C > $OUT/build.log 2>&1 || { grep error $OUT/build.log | head; exit 1; }
echo "build $(el) s"
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
timeout 330 python3 bench/run.py --suite long --backward --no-warm --reps 20 --out $OUT/bench/long > $OUT/bench/long.log 2>&1
echo "long rc=$? ($(el) s)"
timeout 90 python3 bench/run.py --suite decode --out $OUT/bench/decode > $OUT/bench/decode.log 2>&1
echo "decode rc=$? ($(el) s)"
grep -E "^\|" $OUT/bench/long.log | tail -18 | cut -d'|' -f2,4,6,7,8,10,11,12,14,15
grep -E "^\| flexattn" $OUT/bench/decode.log | head -8
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
