#!/usr/bin/env bash
# Session 6, round A (data for the plan): decode per-call time split into host / GPU (bench/run.py's decode suite
# with peers, a probe with a host-path cProfile, the CLI's per-call + back-to-back table), cold compile with
# FLEXATTN_JIT_FAST_COMPILE off / min / max (bench/run.py quick, flexattn only), and ncu section summaries of
# the sm90 backward for sliding1024 vs causal at S=8192 (the largest backward gap).
. "$(dirname "$0")/lib.sh"
O=$OUT/s6a; mkdir -p $O
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=ON > $O/configure.log 2>&1
cmake --build build-gpu -j16 --target flexattn gpu_attention_check gpu_decode_check _C > $O/build.log 2>&1 || { grep -E "error" $O/build.log | head -20; exit 1; }
echo "build $(el) s"
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
timeout 100 python3 bench/lab/round/decode_probe6.py > $O/probe.log 2>&1; echo "probe rc=$? $(el) s"
timeout 40 $F bench --suite decode --backend cuda > $O/cli_decode.log 2>&1; echo "cli decode rc=$? $(el) s"
for lvl in off min max; do
  timeout 70 env FLEXATTN_JIT_FAST_COMPILE=$lvl python3 bench/run.py --suite quick --impls flexattn --backward --no-warm \
    --cases causal,alibi_causal,softcap_causal,relbias_full --out $O/fc_$lvl > $O/fc_$lvl.log 2>&1
  echo "fast_compile=$lvl rc=$? $(el) s"
done
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for m in sliding_window:1023 causal; do
  n=${m%%:*}
  $F run -B 2 -H 16 -Q 8192 -D 128 --dtype bf16 --backend cuda --backward --mask $m > $O/run_$n.log 2>&1
  timeout 90 $NCU --kernel-name flexattn_bwd --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
    $F run -B 2 -H 16 -Q 8192 -D 128 --dtype bf16 --backend cuda --backward --mask $m > $O/ncu_$n.txt 2>&1
  echo "ncu $n rc=$? $(el) s"
done
cd $OUT && tar czf s6a.tgz s6a
echo "==== summary"
cat $OUT/s6a/probe.log | tail -12
grep -E "^ *(B|8|1|64) " $OUT/s6a/cli_decode.log | head -14
for lvl in off min max; do echo "fc=$lvl"; grep -E "^\| (causal|alibi|softcap|relbias)" $OUT/s6a/fc_$lvl.log | cut -c1-200; done
for n in sliding_window causal; do echo "ncu $n"; grep -E "Duration|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Achieved Occupancy" $OUT/s6a/ncu_$n.txt | head -8; done
