#!/usr/bin/env bash
# Builds the sm90 forward with nvcc (not NVRTC) for a few (D, Dv, narrow, persistent) points -- the default
# kernel and the persistent one (FLEXATTN_SM90_PERSISTENT=1) -- and prints, per point,
# ptxas' resource line, wgmma serialization warnings and the SASS facts the design relies on:
# HGMMA count, TMA loads/stores, setmaxnreg, local memory, and the highest register of the producer
# (after setmaxnreg.dec, must stay < 24) and of the whole kernel (consumers, must stay < 240).
# Usage: tests/compile/sm90/nvcc_sass_check.sh   (needs nvcc; cuobjdump + nvdisasm for the SASS part)
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
have_sass=1
command -v cuobjdump >/dev/null && command -v nvdisasm >/dev/null || have_sass=0
for cfg in "64 64 false false" "128 128 false false" "128 128 true false" "192 192 false false" "256 256 false false" \
           "64 128 false false" "64 64 false true" "128 128 false true" "128 128 true true" "256 256 false true"; do
  set -- $cfg
  cat >"$tmp/k.cu" <<CU
#include "common/mod_ops.cuh"
#include "sm90/attn_fwd_sm90.cuh"
using namespace flexattn::kern;
extern "C" __global__ void __launch_bounds__(kSm90Threads, 1)
fwd(const __grid_constant__ AttnParams p) { attn_fwd_sm90<IdentityVariant, bf16, $1, $2, $3, $4>(p); }
CU
  log=$(nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -Xptxas -v -I"$root/kernels" -cubin \
        -o "$tmp/k.cubin" "$tmp/k.cu" 2>&1)
  echo "== D=$1 Dv=$2 narrow=$3 persistent=$4: $(grep -E 'Used' <<<"$log" | sed 's/ptxas info *: //') |" \
       "$(grep -E 'spill' <<<"$log" | xargs)"
  grep -E "C75[0-9][0-9]|serialized" <<<"$log" || true
  if [ $have_sass = 1 ]; then
    cuobjdump -sass "$tmp/k.cubin" | grep -E '^\s+/\*[0-9a-f]{4,}\*/' >"$tmp/k.sass"
    # The producer runs from setmaxnreg.dec to its first unpredicated EXIT.
    producer_max=$(awk '/USETMAXREG.DEALLOC/{p=1} p{print} p && /EXIT/ && !/@/{exit}' "$tmp/k.sass" |
                   { grep -oE '\bR[0-9]+\b' || true; } | tr -d R | sort -n | tail -1)
    echo "   HGMMA $(grep -c HGMMA "$tmp/k.sass"), UTMALDG $(grep -c UTMALDG "$tmp/k.sass")," \
         "UTMASTG $(grep -c UTMASTG "$tmp/k.sass"), USETMAXREG $(grep -c USETMAXREG "$tmp/k.sass")," \
         "LDL/STL $(grep -cE 'LDL|STL' "$tmp/k.sass" || true), max reg R$(grep -oE '\bR[0-9]+\b' "$tmp/k.sass" |
         tr -d R | sort -n | tail -1), producer max reg R$producer_max"
  fi
done
[ $have_sass = 1 ] || echo "(cuobjdump/nvdisasm not on PATH: SASS facts skipped)"
