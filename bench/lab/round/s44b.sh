#!/usr/bin/env bash
# Session 44: the two fixes for the padded rows' split sectors (s43p.sh: +12.9 % L2 -> SM bytes, 2.5x cuDNN's L2
# requests, 8x8k 100.9 vs 93.9 us on H100), side by side: FLEXATTN_DECODE_ROT_ROWS (rotated unpadded rows, two bulk
# copies per row, 2-way ldmatrix conflicts) and FLEXATTN_DECODE_TMA (_tma entries: 128B-swizzled TMA boxes, one issuing
# thread, no conflicts; contiguous caches; paged calls keep the bulk rows). Predicted: both bring the bytes to ~269 MB;
# TMA also cuts the L2 requests to ~2.1 M and the issue instructions; 8x8k gains most of its 7 % to cuDNN.
# Checks (gpu_decode_check: NaN rows past each length exercise the TMA tail zeroing; JIT debug lines show calls that
# fell back from TMA), the decode suite base / rot / tma / tma / rot / base, ncu of 8x8k with each, the SASS.
. "$(dirname "$0")/lib.sh"
out_dir s44b; L=$O
deadline ${S44B_DEADLINE:-330}
nvidia-smi --query-gpu=name --format=csv,noheader
BUILD_PY=ON build_gpu $O flexattn _C gpu_decode_check
python_env
dchecks 70 rot:FLEXATTN_DECODE_ROT_ROWS=1 tma:FLEXATTN_DECODE_TMA=1,FLEXATTN_JIT_DEBUG=1 \
  tmarot:FLEXATTN_DECODE_TMA=1,FLEXATTN_DECODE_ROT_ROWS=1
echo "tma fallbacks: $(grep -c 'not TMA' $O/dcheck_tma.log) ($(grep 'not TMA' $O/dcheck_tma.log | sort | uniq -c | head -3))"
n=0
for c in base rot tma tma rot base; do
  [ $(left) -gt 100 ] || break
  decode_run decode_${n}_$c 40 FLEXATTN_DECODE_ROT_ROWS=$([ $c = rot ] && echo 1 || echo 0) \
    FLEXATTN_DECODE_TMA=$([ $c = tma ] && echo 1 || echo 0)
  n=$((n + 1))
done
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
M=$M,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_requests_srcunit_tex_op_read.sum
M=$M,l1tex__m_xbar2l1tex_read_bytes.sum,smsp__inst_executed.sum
for c in tma rot; do
  [ $(left) -gt 40 ] || break
  env FLEXATTN_DECODE_$([ $c = tma ] && echo TMA || echo ROT_ROWS)=1 timeout $(cap 60 10) ncu --metrics $M \
    -k "regex:flexattn_decode_m16" -c 1 --launch-skip 8 --csv python3 bench/lab/round/decode_ncu17.py flexattn \
    > $O/ncu_$c.csv 2> $O/ncu_$c.err
  echo "ncu $c rc=$? ($(el) s)"
  python3 bench/lab/round/ncu_table.py $O/ncu_$c.csv
done
mkdir -p $OUT/sass
for e in build-gpu/kernel-cache/*/; do
  grep -q "flexattn_decode_m16" $e/meta.json 2>/dev/null || continue
  n=$(basename $e); grep -o "#define FLEXATTN_DECODE_[A-Z_]* [0-9]*" $e/source.cu > $OUT/sass/$n.defines
  cuobjdump -sass $e/kernel.cubin > $OUT/sass/$n.sass 2>&1
done
echo "sass: $(ls $OUT/sass | wc -l) files ($(el) s)"
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
