#!/usr/bin/env bash
# Session 34: the final tree's checks after the review edits (slot helpers, static_asserts): the deterministic set
# (bitwise repeats, buffer gradients included) and the learnable / relbias cases in full. Predicted: all pass.
. "$(dirname "$0")/lib.sh"
out_dir s34f; L=$O
deadline ${S34F_DEADLINE:-200}
nvidia-smi --query-gpu=name --format=csv,noheader
build_gpu $O gpu_attention_check
timeout $(cap 90 5) $CHECK --deterministic > $O/det.log 2>&1
echo "--deterministic rc=$? $(pass_fail $O/det.log) ($(el) s)"; grep -m5 "^FAIL" $O/det.log
timeout $(cap 80 5) $CHECK --only learnable --only relbias > $O/learn.log 2>&1
echo "--only learnable/relbias rc=$? $(pass_fail $O/learn.log) ($(el) s)"; grep -m5 "^FAIL" $O/learn.log
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
