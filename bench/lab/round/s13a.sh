#!/usr/bin/env bash
# Session 13, first call: session 12's last change (the TMA-store epilogue as a define dropped on spill) had not run.
# --quick on relbias / causal / document, then the record run (rec8.sh's bench: --suite long --backward, all peers,
# and --suite decode) into $OUT/bench. ~6.5 min.
. "$(dirname "$0")/lib.sh"
out_dir s13a; L=$O
deadline 540
BUILD_PY=ON build_gpu $O gpu_attention_check flexattn _C
quick_check 70 --only relbias --only causal --only document
record_suites
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
