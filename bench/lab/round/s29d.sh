#!/usr/bin/env bash
# Prepared in session 28: why the D=64 backward trails cuDNN (H100 record 0cffa7b: full 342 vs 473 TFLOP/s, causal 334
# vs 411; D=128 is level: 551 vs 568). D=64 runs the first kernel (64-row query tiles, dQ partial per warpgroup summed in
# shared memory, v3's TMA reductions), not v2. ncu --set full of one dense backward at D=64 and, for reference, D=128:
# duration, issue IPC, tensor / FMA / XU pipes, warp states, top SASS lines by stall samples. Predicted: D=64 bound by
# the per-query-tile fixed work (barriers, dQ sum in shared memory, waits on wgmma groups) rather than a pipe; if so the
# lever is 128-row query tiles at D=64 (FA3's hdim-64 backward tile) or v2's one-partial dQ at n32.
. "$(dirname "$0")/lib.sh"
out_dir s29d; L=$O
deadline ${S29D_DEADLINE:-400}
build_gpu $O flexattn
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for d in 64 128; do
  $F run -B 2 -H 16 -Q 8192 -D $d --dtype bf16 --backend cuda --backward > $O/run_d$d.log 2>&1
  timeout $(cap 110 10) $NCU --kernel-name regex:'^flexattn_bwd$' --launch-count 1 --set full --import-source yes \
    -o $O/ncu_d$d -f $F run -B 2 -H 16 -Q 8192 -D $d --dtype bf16 --backend cuda --backward > $O/ncu_d$d.log 2>&1
  echo "ncu D=$d rc=$? ($(el) s), backward $(ms_of $O/run_d$d.log backward) ms"
  $NCU --import $O/ncu_d$d.ncu-rep --page details > $O/ncu_d$d.details.txt 2>&1
  $NCU --import $O/ncu_d$d.ncu-rep --page raw --csv \
    --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__inst_executed.avg.per_cycle_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed \
    > $O/ncu_d$d.pipes.csv 2>&1
  $NCU --import $O/ncu_d$d.ncu-rep --page source --csv --print-source sass > $O/ncu_d$d.sass.csv 2>&1
  grep -E "^ +Duration|Issued Ipc|No Eligible|Eligible Warps" $O/ncu_d$d.details.txt | head -5
  tail -1 $O/ncu_d$d.pipes.csv
  python3 bench/lab/round/ncu_top.py $O/ncu_d$d.sass.csv 16
done
rm -f $O/*.ncu-rep
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
