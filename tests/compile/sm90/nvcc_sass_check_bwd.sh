#!/usr/bin/env bash
# Builds the sm90 backward main kernel with nvcc (not NVRTC) for each supported (D, Dv) and two
# variants (identity; causal mask + a softcap score_mod, i.e. mask_mod, score_mod and score_grad in
# the element-wise step) and prints ptxas' resource line, any wgmma serialization warning, and -- when
# cuobjdump is on PATH -- HGMMA (with .tnspA for dQ = dS K), TMA loads, setmaxnreg, REDG / UBLKRED (dQ) and
# local-memory counts, the highest register of the kernel (consumers, must stay < 232) and of the
# producer warpgroup (after setmaxnreg.dec, must stay < 40). Each configuration is built twice: the default kernel
# (dQ by red.global.add, "dq=red") and the opt-in bulk dQ path (FLEXATTN_SM90_BWD_DQ_BULK, template
# argument kDqBulk = true, "dq=bulk": UBLKRED instead of REDG).
# Usage: tests/compile/sm90/nvcc_sass_check_bwd.sh   (needs nvcc; cuobjdump for the SASS part)
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
have_sass=1
command -v cuobjdump >/dev/null || have_sass=0
# The backward v2 (FLEXATTN_SM90_BWD_V2, D = 128 only): "dq=v2red" (kDqBulk false, kV2 true, setmaxnreg
# 40 / 232) and "dq=v2bulk" (both true, 24 / 240: producer max reg must stay < 24).
# "dq=v3" (FLEXATTN_SM90_BWD_V3: kDqTma as well): UBLKRED replaced by D / 32 UTMAREDG per dQ tile.
# "dq=v3a" (FLEXATTN_SM90_BWD_V3 on the first kernel's bulk path: kDqBulk, kDqTma, not kV2; D = 64 only).
for dq in ${SM90_BWD_DQ_PATHS:-red bulk v2red v2bulk v3 v3a}; do
extra=""
[ $dq = bulk ] && extra=", true"
[ $dq = v2red ] && extra=", false, true"
[ $dq = v2bulk ] && extra=", true, true"
[ $dq = v3 ] && extra=", true, true, true"
[ $dq = v3a ] && extra=", true, false, true"
for variant in IdentityVariant SoftcapCausal; do
  for cfg in "64 64" "128 128" "64 128" "128 64"; do
    set -- $cfg
    case $dq in v2* | v3) [ "$1" = 128 ] || continue ;; v3a) [ "$1" = 64 ] || continue ;; esac
    cat >"$tmp/k.cu" <<CU
#include "common/mod_ops.cuh"
#include "sm90/attn_bwd_sm90.cuh"
using namespace flexattn::kern;
struct SoftcapCausal : IdentityVariant {
  static constexpr bool kHasScoreMod = true, kHasMaskMod = true;
  __device__ static float score_mod(const ModParams& m, float s, int, int, int, int) {
    return float(m.lit[0]) * tanhf(s / float(m.lit[0]));
  }
  __device__ static bool mask_mod(const ModParams&, int, int, int q, int kv) { return q >= kv; }
  __device__ static float score_grad(const ModParams& m, float s, int, int, int, int, float g) {
    const float t = tanhf(s / float(m.lit[0]));
    return g * (1.f - t * t);
  }
};
extern "C" __global__ void __launch_bounds__(kSm90Threads, 1)
bwd(const __grid_constant__ AttnParams p) { attn_bwd_sm90<$variant, bf16, $1, $2$extra>(p); }
CU
    log=$(nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -Xptxas -v -I"$root/kernels" -cubin \
          -o "$tmp/k.cubin" "$tmp/k.cu" 2>&1)
    echo "== dq=$dq $variant D=$1 Dv=$2: $(grep -E 'Used' <<<"$log" | sed 's/ptxas info *: //') |" \
         "$(grep -E 'spill' <<<"$log" | xargs)"
    grep -E "C75[0-9][0-9]|serialized" <<<"$log" || true
    if [ $have_sass = 1 ]; then
      cuobjdump -sass "$tmp/k.cubin" | grep -E '^\s+/\*[0-9a-f]{4,}\*/' >"$tmp/k.sass"
      # Producer region: from setmaxnreg.dec on (with dq=bulk it holds the dQ writer warp's code, then
      # the producer's; both end in EXIT).
      # (Up to the function's last EXIT: out-of-line subroutines, e.g. the consumers' division slow path,
      # come after it.)
      dl=$(grep -n USETMAXREG.DEALLOC "$tmp/k.sass" | head -1 | cut -d: -f1)
      ex=$(grep -n EXIT "$tmp/k.sass" | tail -1 | cut -d: -f1)
      producer_max=$(sed -n "${dl},${ex}p" "$tmp/k.sass" | { grep -oE '\bR[0-9]+\b' || true; } | tr -d R | sort -n | tail -1)
      echo "   HGMMA $(grep -c HGMMA "$tmp/k.sass") (tnspA $(grep -c tnspA "$tmp/k.sass")), UTMALDG" \
           "$(grep -c UTMALDG "$tmp/k.sass"), USETMAXREG $(grep -c USETMAXREG "$tmp/k.sass"), REDG" \
           "$(grep -cE "[^A-Z]REDG" "$tmp/k.sass" || true), UBLKRED $(grep -c UBLKRED "$tmp/k.sass"), UTMAREDG $(grep -c UTMAREDG "$tmp/k.sass"), LDL/STL $(grep -cE 'LDL|STL' "$tmp/k.sass" || true), max reg" \
           "R$(grep -oE '\bR[0-9]+\b' "$tmp/k.sass" | tr -d R | sort -n | tail -1), producer max reg R$producer_max"
    fi
  done
done
done
[ $have_sass = 1 ] || echo "(cuobjdump not on PATH: SASS facts skipped)"
