#!/usr/bin/env bash
# Session 16 round 5: the landed tree (builder in two programs, the backward's fallback list) across the corpus:
# gpu_attention_check --quick (every corpus entry, D = 64 / 128, odd lengths, GQA, backward).
. "$(dirname "$0")/lib.sh"
out_dir s16e; L=$O
deadline 300
build_gpu $O gpu_attention_check flexattn
quick_check 240
echo "total $(el) s"
