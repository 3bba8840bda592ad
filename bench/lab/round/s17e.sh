#!/usr/bin/env bash
# Session 17 round 5: ncu of the 8x8k decode's main kernel, flexattn (flexattn_decode_m16, 77.0 us in round 4's trace)
# against cuDNN's (72.3 us): DRAM throughput, L2 traffic, occupancy, stall reasons, for the next decode round.
. "$(dirname "$0")/lib.sh"
out_dir s17e; L=$O
deadline 250
BUILD_PY=ON build_gpu $O flexattn _C
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python:$PWD/bench PYTHONUNBUFFERED=1
python3 bench/lab/round/decode_ncu17.py flexattn > /dev/null 2>&1  # kernel cache warm
for impl in flexattn sdpa-cudnn; do
  k=$([ $impl = flexattn ] && echo "regex:flexattn_decode_m16" || echo "regex:cudnn_generated")
  timeout $(cap 90 10) ncu --set full -k "$k" -c 1 --launch-skip 8 --page details --csv \
    python3 bench/lab/round/decode_ncu17.py $impl > $O/ncu_$impl.csv 2> $O/ncu_$impl.err
  echo "ncu $impl rc=$? ($(el) s)"
  python3 bench/lab/round/ncu_table.py $O/ncu_$impl.csv "Duration" "DRAM Throughput" "Memory Throughput" "L2 Hit Rate" \
    "Achieved Occupancy" "Registers Per Thread" "Block Size" "Grid Size" "Dynamic Shared Memory Per Block" \
    "Theoretical Occupancy" "Issue Slots Busy" "No Eligible" "L1/TEX Hit Rate" "Mem Busy" "Max Bandwidth" \
    "Waves Per SM" "Executed Ipc Active"
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
