#!/usr/bin/env bash
# Prepared in session 29 for the next device (an H200 if lent; record on an H100 too, by device name): the record run
# of the tree with session 29's defaults (padded head dims on, the distance tables for T5; the peeled loop gone),
# after the two `make gpu-test` steps that changed (the padded dims turned off, T5's per-entry path) and the quick
# check of the padded and t5 cases with the defaults. Record: python3 bench/run.py --record DIR/bench/long
# DIR/bench/decode [DIR/bench/extra] [DIR/bench/hd96], fix the meta commit. Predicted: t5_full D=128 forward ~4.5x its 81 TFLOP/s on the
# H100 record (s29a); every suite row within the spread of the previous record of that device; if s29e / s29f flipped
# a default first, relbias_full and the D=64 backward rows move as those rounds measured.
. "$(dirname "$0")/lib.sh"
out_dir s30r; L=$O
deadline ${S30R_DEADLINE:-570}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C gpu_attention_check
FLEXATTN_SM90_PAD_HEAD_DIM=0 timeout $(cap 40 5) $CHECK --quick --only causal --only full --only alibi > $O/no_pad.log 2>&1
echo "PAD_HEAD_DIM=0 quick rc=$? $(pass_fail $O/no_pad.log) ($(el) s)"; grep -m3 "^FAIL" $O/no_pad.log
FLEXATTN_SM90_REL_DIAG=0 timeout $(cap 30 5) $CHECK --quick --only t5 > $O/no_rel_diag.log 2>&1
echo "REL_DIAG=0 quick t5 rc=$? $(pass_fail $O/no_rel_diag.log) ($(el) s)"; grep -m3 "^FAIL" $O/no_rel_diag.log
record_suites
# Head dim 96 (padded onto the D=128 forward kernel; backward on the sm80 family), full and causal, when time is left.
if [ "$(left)" -ge 70 ]; then
  timeout $(cap 100 10) python3 bench/run.py --suite hd96 --cases full,causal --backward --no-warm --reps 20 \
    --out $OUT/bench/hd96 > $OUT/bench/hd96.log 2>&1
  echo "hd96 rc=$? ($(el) s)"; grep -E "^\|" $OUT/bench/hd96.log | tail -9 | cut -d'|' -f2,4,6,7,8,10,11,12
fi
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
