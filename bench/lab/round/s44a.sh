#!/usr/bin/env bash
# Session 44: s43b.sh (FLEXATTN_DECODE_ROT_ROWS checks, decode base / rot / rot / base) and then, in the same call
# (device starts are scarce), s43p.sh's ncu of the flexattn 8x8k kernel with the rotated rows: the L2 -> SM bytes
# should fall from 303.4 MB (padded rows, H100) to ~269 MB (cuDNN 269.3) and the L2 hit sectors from 2.46M to ~0.
. "$(dirname "$0")/lib.sh"
S43B_DEADLINE=${S44A_B_DEADLINE:-200} bash "$(dirname "$0")/s43b.sh"
T=$(( ${S44A_DEADLINE:-290} - $(el) ))
[ $T -gt 60 ] && S43P_ENV="FLEXATTN_DECODE_ROT_ROWS=1" S43P_DEADLINE=$T bash "$(dirname "$0")/s43p.sh"
# SASS of the decode kernels the runs compiled (for instruction counts on a machine without a disassembler).
mkdir -p $OUT/sass
for e in build-gpu/kernel-cache/*/; do
  grep -q "flexattn_decode_m16" $e/meta.json 2>/dev/null || continue
  n=$(basename $e); grep -o "#define FLEXATTN_DECODE_[A-Z_]* [0-9]*" $e/source.cu > $OUT/sass/$n.defines
  cuobjdump -sass $e/kernel.cubin > $OUT/sass/$n.sass 2>&1; cuobjdump -res-usage $e/kernel.cubin > $OUT/sass/$n.res 2>&1
done
echo "sass: $(ls $OUT/sass | wc -l) files"
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
