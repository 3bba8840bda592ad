#!/usr/bin/env bash
# Prepared in session 27 for an H200: first the checks that session 27's tree has not had on a GPU (mask_mods without
# a block mask: the tall tile's rotated ALiBi, never run on a GPU before; the `alibi` corpus entry), then the record run
# with the D=64 softcap default (SOFTCAP_RCP=8 there). Record here: python3 bench/run.py --record DIR/bench/long
# DIR/bench/decode [DIR/bench/extra], and fix the meta commit. Predicted: softcap_causal D=64 forward 226 -> ~255
# TFLOP/s, every other row within the run-to-run spread of session 26's record.
. "$(dirname "$0")/lib.sh"
out_dir s28r; L=$O
deadline ${S28R_DEADLINE:-560}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
quick_check 60 --only alibi --only causal --only document
record_suites
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
