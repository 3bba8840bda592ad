#!/usr/bin/env bash
# Prepared in session 27 (issue 5, softcap at 61 % of dense): why does the D=128 softcap forward not move when the
# tanh's reciprocal leaves the MUFU (SOFTCAP_RCP=8: D=64 -14 % ms, D=128 flat, s27a/s27b on an H100)? By count the
# D=128 tile should be MUFU-bound at k = 0 (3 MUFU ops per entry: 0.19 clk per entry and SM against the tensor
# cores' 0.125) and near balance at k = 8. ncu (--set full, one flushed forward) of softcap + causal D=128 at k = 0
# and k = 8, and causal D=128 for reference: duration, issue IPC, the XU (MUFU) and FMA pipes' utilisation, warp
# states, and the top SASS lines by stall samples. Predicted: XU ~80-90 % busy at k = 0 and ~55 % at k = 8; if so
# the k = 8 tile is bound elsewhere (the consumer warps' issue, or the pingpong hand-off), which the stall lines show.
. "$(dirname "$0")/lib.sh"
out_dir s28b; L=$O
deadline ${S28B_DEADLINE:-400}
build_gpu $O flexattn
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
run_ncu() {  # name, env..., then flexattn run args after --
  local name=$1; shift
  local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" $F run -B 2 -H 16 -Q 8192 -D 128 --dtype bf16 --backend cuda "$@" > $O/run_$name.log 2>&1
  env "${envs[@]}" timeout $(cap 100 10) $NCU --kernel-name regex:'^flexattn_fwd$' --launch-count 1 --set full \
    --import-source yes -o $O/ncu_$name -f $F run -B 2 -H 16 -Q 8192 -D 128 --dtype bf16 --backend cuda "$@" \
    > $O/ncu_$name.log 2>&1
  echo "== $name rc=$? ($(el) s), forward $(ms_of $O/run_$name.log forward) ms"
  $NCU --import $O/ncu_$name.ncu-rep --page details > $O/ncu_$name.details.txt 2>&1
  $NCU --import $O/ncu_$name.ncu-rep --page raw --csv \
    --metrics sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed.avg.per_cycle_active \
    > $O/ncu_$name.pipes.csv 2>&1
  $NCU --import $O/ncu_$name.ncu-rep --page source --csv --print-source sass > $O/ncu_$name.sass.csv 2>&1
  grep -E "^ +Duration|Issued Ipc|No Eligible|Eligible Warps" $O/ncu_$name.details.txt | head -5
  tail -1 $O/ncu_$name.pipes.csv
  python3 bench/lab/round/ncu_top.py $O/ncu_$name.sass.csv 14
}
run_ncu softcap_k0 FLEXATTN_SM90_SOFTCAP_RCP=0 -- --mask causal --score softcap:30
run_ncu softcap_k8 FLEXATTN_SM90_SOFTCAP_RCP=8 -- --mask causal --score softcap:30
run_ncu causal FLEXATTN_SM90_SOFTCAP_RCP=0 -- --mask causal
rm -f $O/*.ncu-rep
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
