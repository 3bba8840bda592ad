#!/usr/bin/env bash
# Session 3: where do the sparse-mask cases lose at S=2048? Kernel-only durations (ncu) of the sm90 forward
# for dense / causal / document against the CLI's per-call event time, plus a stall breakdown of document.
. "$(dirname "$0")/lib.sh"
[ -x $F ] || { cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=OFF >/dev/null; cmake --build build-gpu -j16 --target flexattn > $OUT/build.log 2>&1; }
ARGS="-B 4 -H 16 -Q 2048 -D 128 --dtype bf16 --backend cuda"
declare -A M=([dense]="" [causal]="q_idx >= kv_idx" [document]="q_idx // 256 == kv_idx // 256 && q_idx >= kv_idx" [sliding]="q_idx >= kv_idx && q_idx - kv_idx < 1024")
for c in dense causal document sliding; do
  if [ -n "${M[$c]}" ]; then set -- --mask-expr "${M[$c]}"; else set --; fi
  $F run $ARGS "$@" > /dev/null 2>&1  # compile outside the profile
  timeout 60 ncu -k regex:attn_fwd --metrics gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__block_size,sm__warps_active.avg.pct_of_peak_sustained_active $F run $ARGS "$@" > $OUT/ncu_$c.log 2>&1
  echo "== $c"; grep -E "attn_fwd|gpu__time|sm__throughput|grid_size|block_size|warps_active" $OUT/ncu_$c.log | head -12
done
timeout 120 ncu -k regex:attn_fwd --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy $F run $ARGS --mask-expr "${M[document]}" > $OUT/ncu_doc_full.log 2>&1
grep -E "Stall|stall|Warp Cycles|Issued|Eligible|Active Warps|Registers|Shared Memory|Waves|Duration|L1|L2 Hit" $OUT/ncu_doc_full.log | head -50
