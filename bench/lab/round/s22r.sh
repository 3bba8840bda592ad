#!/usr/bin/env bash
# Session 22 record run: the tree with the tall forward tile on by default (dense D=64: ~500 TFLOP/s expected from
# s21b.sh) and tanh_approx; long suite with backward and flexattn's deterministic backward, all peers; decode suite;
# the softcap_approx_causal case when time is left.
# Record here: python3 bench/run.py --record DIR/bench/long DIR/bench/decode [DIR/bench/extra].
. "$(dirname "$0")/lib.sh"
out_dir s22r; L=$O
deadline 570
BUILD_PY=ON build_gpu $O flexattn _C
record_suites
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
