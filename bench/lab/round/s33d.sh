#!/usr/bin/env bash
# Session 33, after s33c: the rank warp was within det18's noise (causal D=128 +14.0 % with it, +12.9 % without; full
# +6.7 / +4.2 %; D=64 causal +8.3 / +10.5 %) and the old code's causal cost moved from +22 % (s33b) to +12.9 % between
# two H100s. So an A/B/B/A of FLEXATTN_SM90_BWD_RANK_WARP on the deterministic backward (long128: causal, document,
# full), then where document's +26 % goes: ncu SOL of its three backward kernels, default and deterministic.
. "$(dirname "$0")/lib.sh"
out_dir s33d; L=$O
deadline ${S33D_DEADLINE:-420}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C
SWEEP_SUITE=long128 SWEEP_EXTRA=--deterministic bwd_sweep FLEXATTN_SM90_BWD_RANK_WARP "0 1" causal,document,full
python3 bench/lab/round/sweep_table.py $O/bsweep_FLEXATTN_SM90_BWD_RANK_WARP FLEXATTN_SM90_BWD_RANK_WARP bwd_det_ms 0 1
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for mode in default det; do
  [ "$(left)" -ge 40 ] || { echo "ncu $mode skipped (time)"; continue; }
  d=(); [ $mode = det ] && d=(--deterministic)
  args=(run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D 128 --mask-expr "q_idx // 1024 == kv_idx // 1024 && q_idx >= kv_idx" --backward "${d[@]}")
  $F "${args[@]}" > $O/warm_$mode.log 2>&1
  timeout $(cap 60 10) $ncu --kernel-name regex:'flexattn_bwd' --launch-count 3 --section SpeedOfLight --section LaunchStats \
    -o $O/ncu_doc_$mode -f $F "${args[@]}" > $O/ncu_doc_$mode.log 2>&1
  echo "ncu doc $mode rc=$? ($(el) s)"
  $ncu --import $O/ncu_doc_$mode.ncu-rep --page details > $O/ncu_doc_$mode.details.txt 2>&1
  grep -E "flexattn_bwd|^ +Duration|Elapsed Cycles|SM Active Cycles" $O/ncu_doc_$mode.details.txt | head -12
  rm -f $O/ncu_doc_$mode.ncu-rep
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
