#!/usr/bin/env bash
# Session 8: the record run of bench/results/h200-latest.json on the committed tree: bench/run.py --suite long --backward
# (B=2 H=16 S=8192, D=128 and 64, every case, all peers) and --suite decode, as session 6's final round (r19.sh).
. "$(dirname "$0")/lib.sh"
deadline 560
mkdir -p $OUT/bench
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=ON > $OUT/configure.log 2>&1
cmake --build build-gpu -j16 --target flexattn _C > $OUT/build.log 2>&1 || { grep error $OUT/build.log | head; exit 1; }
echo "build $(el) s"
record_suites
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
