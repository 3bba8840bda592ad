#!/usr/bin/env bash
# Session 13, last call: round 3's f16 relbias check (its command line was wrong), D=64 / causal relbias checks, then
# the record run on the committed tree (bench/run.py --suite long --backward and --suite decode, all peers). ~5.5 min.
. "$(dirname "$0")/lib.sh"
out_dir s13d; L=$O
deadline 560
BUILD_PY=ON build_gpu $O gpu_attention_check flexattn _C
run_check -Q 777 -D 128 --dtype f16 --score relbias --mask causal
run_check -Q 1000 -D 64 --dtype bf16 --score relbias --mask causal --hkv 2
run_check -Q 4097 -D 64 --dtype f16 --score relbias
run_check_summary
record_suites
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
