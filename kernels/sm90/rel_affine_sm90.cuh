#pragma once
// ALiBi-shaped score_mods (codegen's kRelAffine: score_mod = score + slope(b, h) * (kv - q)) with
// FLEXATTN_SM90_AFFINE=1 (the source generators define FLEXATTN_SM90_REL_AFFINE): the bias is affine in the
// position, so a thread computes one base term per tile and each entry u = fma(slope, k, fma(raw, scale, base))
// with k the entry's compile-time offset: 2 FFMA per entry instead of FMUL (scale), IADD3 (kv - q), I2FP and
// FFMA (ALiBi's SASS, session 5 profile; I2FP runs at the quarter rate of the MUFU pipe that the exp2 already
// fills at D = 64). The reference rounds raw * scale and the sum; this rounds raw * scale + base and the sum,
// the same size of error (ulps of |u|). Variants written by hand without kRelAffine take the general form.
#include "common/params.h"
#include "common/variant.cuh"

namespace flexattn::kern::sm90 {

FLEXATTN_VARIANT_HOOK(RelAffineOf, kRelAffine, bool, false)
template <class V>
__device__ __forceinline__ constexpr bool use_rel_affine() {
#if defined(FLEXATTN_SM90_REL_AFFINE)
  return RelAffineOf<V>::value;
#else
  return false;
#endif
}
// Relative-position gathers (codegen's kRelGather), with FLEXATTN_SM90_REL_GATHER: the forward's
// scores_inside_rel_gather (fwd_softmax_sm90.cuh) and the backward's BwdRelGather (bwd_rel_gather_sm90.cuh).
FLEXATTN_VARIANT_HOOK(RelGatherOf, kRelGather, int, 0)
template <class V>
__device__ __forceinline__ constexpr bool use_rel_gather() {
#if defined(FLEXATTN_SM90_REL_GATHER)
  return RelGatherOf<V>::value != 0;
#else
  return false;
#endif
}

template <class V>
__device__ __forceinline__ float rel_slope_of(const AttnParams& p, int b, int h) {
  if constexpr (use_rel_affine<V>()) return V::rel_slope(p.mod, b, h);
  else return 0.f;
}

// The backward's transposed tiles (S^T, ptx/wgmma.cuh layout): thread t of its quad holds kv rows kv_row and
// kv_row + 8 and query columns q0 + 8i + 2t (+1); entry (i, e) is kv row kv_row + 8 (e >> 1), query column
// q0 + 8i + 2t + (e & 1), so kv - q = (kv_row - q0 - 2t) + 8 (e >> 1) - 8i - (e & 1). Learnable slopes
// (buffer gradients) keep the general form: their buffer_grad reads the per-entry positions anyway.
template <class V>
__device__ __forceinline__ constexpr bool bwd_rel_affine() {
  return use_rel_affine<V>() && !V::kHasBufferGrad;
}
struct BwdAffine {
  float slope = 0.f, base = 0.f;  // base = slope * (kv_row - q0 - 2t), positions with their offsets
  template <class V>
  __device__ __forceinline__ static BwdAffine of(const AttnParams& p, int b, int h, int q0, int kv_row, int t) {
    BwdAffine a;
    if constexpr (bwd_rel_affine<V>()) {
      a.slope = rel_slope_of<V>(p, b, h);
      a.base = a.slope * float((kv_row + p.kv_offset) - (q0 + 2 * t + p.q_offset));
    }
    return a;
  }
  __device__ __forceinline__ float u(float raw, float scale, int i, int e) const {
    const int k = 8 * (e >> 1) - 8 * i - (e & 1);
    const float v = fmaf(raw, scale, base);
    return k != 0 ? fmaf(slope, float(k), v) : v;
  }
};

}  // namespace flexattn::kern::sm90
