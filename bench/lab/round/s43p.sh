#!/usr/bin/env bash
# Session 43: where the decode kernel's 5-9 % to cuDNN goes (issue 7; H200 session 33: 8x8k 3238 vs 3396, 1x128k
# 3602 vs 3867, 64x4k 3856 vs 4221; H100 s43a alike). ncu of one flushed 8x8k step, flexattn's main kernel against
# cuDNN's: DRAM bytes read and written (over-fetch?), L2 sectors and requests from L1/TEX and the hit split (session 17
# saw 19 % L2 hits against 0.7 %), duration, DRAM throughput, and the stall reasons (ncu's WarpStateStats section).
# S43P_ENV: settings for the flexattn runs (e.g. "FLEXATTN_DECODE_ROT_ROWS=1", to confirm the rotated rows' bytes).
. "$(dirname "$0")/lib.sh"
out_dir s43p; L=$O
deadline ${S43P_DEADLINE:-200}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python:$PWD/bench PYTHONUNBUFFERED=1
env ${S43P_ENV:-} python3 bench/lab/round/decode_ncu17.py flexattn > /dev/null 2>&1  # kernel cache warm
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
M=$M,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_requests_srcunit_tex_op_read.sum
M=$M,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,l1tex__m_xbar2l1tex_read_bytes.sum,sm__warps_active.avg.pct_of_peak_sustained_active
M=$M,smsp__inst_executed.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sectors_srcunit_tex.sum
for impl in flexattn sdpa-cudnn; do
  [ $(left) -gt 20 ] || break
  k=$([ $impl = flexattn ] && echo "regex:flexattn_decode_m16" || echo "regex:cudnn_generated")
  env ${S43P_ENV:-} timeout $(cap 70 10) ncu --metrics $M --section WarpStateStats -k "$k" -c 1 --launch-skip 8 --csv \
    python3 bench/lab/round/decode_ncu17.py $impl > $O/ncu_$impl.csv 2> $O/ncu_$impl.err
  echo "ncu $impl rc=$? ($(el) s)"
  python3 bench/lab/round/ncu_table.py $O/ncu_$impl.csv
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
