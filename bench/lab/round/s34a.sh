#!/usr/bin/env bash
# Prepared in session 33 for the next device: the checks of 1ffe205 (review fixes of the rank warp, never on a GPU):
# the deterministic set (bitwise repeats), the quick set, the persistent backward's quick run (its ring barriers are no
# longer initialised), and a cold compile of a learnable relbias + document backward (three fallback sources compile
# ahead now). Predicted: all pass; the cold compile within ~1 s of session 31's record (no serial fallback compile).
. "$(dirname "$0")/lib.sh"
out_dir s34a; L=$O
deadline ${S34A_DEADLINE:-420}
nvidia-smi --query-gpu=name --format=csv,noheader
build_gpu $O flexattn gpu_attention_check
timeout $(cap 120 5) $CHECK --deterministic > $O/det.log 2>&1
echo "--deterministic rc=$? $(pass_fail $O/det.log) ($(el) s)"; grep -m5 "^FAIL" $O/det.log
quick_check 170
FLEXATTN_SM90_BWD_PERSISTENT=1 timeout $(cap 120 5) $CHECK --quick > $O/persistent.log 2>&1
echo "PERSISTENT=1 --quick rc=$? $(pass_fail $O/persistent.log) ($(el) s)"; grep -m3 "^FAIL" $O/persistent.log
t=$(date +%s)
FLEXATTN_CACHE_DIR=$O/cold-cache timeout $(cap 90 5) $F run --backend cuda --dtype bf16 -B 1 -H 4 -Q 2048 -D 128 \
  --score relbias --mask document:4 --backward --deterministic > $O/cold.log 2>&1
echo "cold learnable relbias + document fwd+bwd rc=$? $(( $(date +%s) - t )) s wall ($(el) s)"
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
