#!/usr/bin/env bash
# Prepared in session 29 (issue 6: sliding / document backward at 1.30x / 1.25x of torch flex, 1.5x wanted). On the
# H200 record the sliding backward (0.833 ms) is within ~0.12 ms of 2.5x its forward (0.284 ms), and the preprocess
# (delta, dQ-accumulator clear) and dQ convert move ~470 MB at B=2 H=16 S=8192 D=128 (~0.12 ms at 4 TB/s: session 9's
# ncu had 70 + 47 us), so the aux kernels may be most of that gap. And the persistent backward, which should hide
# each CTA's prologue and epilogue on these short walks, still trails the default by 5-6 % at D=128 (s29b).
# 1. Every kernel of one sliding_window:1024 backward (ncu SpeedOfLight, all launches of the call): the main kernel's
#    and the aux kernels' durations, default and FLEXATTN_SM90_BWD_PERSISTENT=1.
# 2. ncu --set full of the main kernel, default vs persistent (sliding D=128): warp states, top stall lines (ncu_top).
# Predicted: aux kernels ~0.10-0.12 ms of the ~0.88 ms (H100); the persistent kernel's loss in its steady state
# (stall lines in the q-tile loop: its wgmma descriptors come through 4 R2UR per HGMMA instead of 2, SASS s29), not in
# the tile hand-off.
. "$(dirname "$0")/lib.sh"
out_dir s30b; L=$O
deadline ${S30B_DEADLINE:-400}
build_gpu $O flexattn
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
args=(run -B 2 -H 16 -Q 8192 -D 128 --dtype bf16 --backend cuda --mask sliding_window:1024 --backward)
for ps in 0 1; do
  FLEXATTN_SM90_BWD_PERSISTENT=$ps $F "${args[@]}" > $O/run_p$ps.log 2>&1
  echo "persistent=$ps backward $(ms_of $O/run_p$ps.log backward) ms forward $(ms_of $O/run_p$ps.log forward) ms"
  FLEXATTN_SM90_BWD_PERSISTENT=$ps timeout $(cap 60 10) $NCU --section SpeedOfLight --kernel-name regex:'flexattn_bwd' \
    $F "${args[@]}" > $O/sol_p$ps.log 2>&1
  grep -E "flexattn_bwd|Duration" $O/sol_p$ps.log | paste - - | awk '{print "   ", $1, $(NF-1), $NF}' | sort | uniq -c | head -8
  FLEXATTN_SM90_BWD_PERSISTENT=$ps ncu_full p$ps '^flexattn_bwd$' 90 $F "${args[@]}"
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
