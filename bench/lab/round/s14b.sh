#!/usr/bin/env bash
# Session 14 round 2: round 1's tree with the variants without mask_mod back to two branches (their tail its
# own, so the softmax keeps a branch join below it: round 1's single branch let ptxas hoist the P V wait above
# the row max, full D=128 654 vs 677). `run --check` on those variants at odd lengths, then the record run
# (bench/run.py long --backward and decode, every peer) with the GPU hold and compile jobs 2. ~9.5 min.
. "$(dirname "$0")/lib.sh"
out_dir s14b; L=$O
deadline 585
BUILD_PY=ON build_gpu $O gpu_attention_check flexattn _C
for q in 1 17 129 1000 4097; do run_check --dtype bf16 -Q $q -D 128; done
run_check --dtype bf16 -Q 4097 -D 128 --score softcap:30
run_check --dtype bf16 -Q 1000 -D 64 --score alibi --hkv 2
run_check --dtype f16 -Q 129 --kv 1000 -D 128 --score relbias
run_check --dtype bf16 -Q 1000 -D 128 --mask causal
run_check_summary
rm -rf $FLEXATTN_CACHE_DIR
record_suites
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
