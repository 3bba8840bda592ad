#!/usr/bin/env bash
# Session 30, the shortest check of FLEXATTN_SM90_BWD_DQ_CLAIM=1 (for a call of ~200 s): build, then `run --check` with
# query tiles no kv reaches (D 64 / 128 / 256), persistent, deterministic. s30a.sh is the full round.
. "$(dirname "$0")/lib.sh"
out_dir s30q; L=$O
deadline ${S30Q_DEADLINE:-220}
nvidia-smi --query-gpu=name --format=csv,noheader
build_gpu $O flexattn
export FLEXATTN_SM90_BWD_DQ_CLAIM=1
run_check --dtype bf16 -Q 1000 --kv 129 -D 128 --mask sliding_window:100 --backward
run_check --dtype f16 -Q 777 --kv 100 -D 64 --mask sliding_window:30 --backward --hkv 1
run_check --dtype bf16 -Q 4097 -D 128 --mask causal --backward
run_check --dtype bf16 -Q 1000 --kv 129 -D 256 --mask sliding_window:100 --backward
FLEXATTN_SM90_BWD_PERSISTENT=1 run_check --dtype bf16 -Q 1000 -D 128 --mask causal --backward
run_check --dtype bf16 -Q 4097 -D 128 --mask causal --backward --deterministic
run_check --dtype bf16 -Q 4097 -D 64 --mask prefix_lm:1000 --backward --deterministic --hkv 2
run_check_summary
