#pragma once
// Element-wise score logic shared by the sm80 kernels: scale -> score_mod -> bounds -> mask_mod, and
// the backward's P / dS for one entry. Kept apart from the fragment code so every kernel applies the
// semantics the same way (variant.cuh states them).
#include "common/numeric.cuh"
#include "common/params.h"
#include "common/variant.cuh"

namespace flexattn::kern {

// s' in log2 units for a raw dot product at (q, kv); -inf where masked. qw / kvw are the wrapped
// indices handed to the mods; in_bounds is kv < S (the caller knows rows are handled separately).
template <class V, bool kFull>
__device__ __forceinline__ float masked_score_log2(const AttnParams& p, float raw, int b, int h, int qw, int kvw,
                                                   bool in_bounds) {
  if constexpr (!V::kHasScoreMod && (kFull || !V::kHasMaskMod)) {
    return in_bounds ? raw * (p.scale * kLog2e) : neg_inf();
  } else {
    float s = raw * p.scale;
    if constexpr (V::kHasScoreMod) s = V::score_mod(p.mod, s, b, h, qw, kvw);
    bool keep = in_bounds;
    if constexpr (!kFull && V::kHasMaskMod) keep = keep && V::mask_mod(p.mod, b, h, qw, kvw);
    return keep ? s * kLog2e : neg_inf();
  }
}

// Backward entry: P = exp(s' - lse) and dS = score_grad(s, P (dP - delta)), both 0 where masked.
// lse2 is the row's lse in log2 units (+inf for a fully masked row, so P = 0 there). The buffer
// gradient: added per entry (buffer_grad, when call_buffer_grad), or with kBgValue returned instead
// (buffer_grad_value; the sm90 per-warp reduction sums it, sm90/bwd_buffer_grad_sm90.cuh). kInB: the
// caller knows q < L and kv < S, so the bounds test and the index wrapping (the identity there) are
// left out (the sm90 consumers' interior tiles). kGivenU: the caller evaluated score_mod(s) as `given_u`
// (the sm90 backward's affine ALiBi path, sm90/rel_affine_sm90.cuh). mask_on = false: a full block handled
// by the kFull = false instantiation (sm90 edge tiles; a full block never applies mask_mod). One definition
// for every kernel's recompute.
template <class V, bool kFull, bool kInB = false, bool kBgValue = false, bool kGivenU = false>
__device__ __forceinline__ auto backward_entry(const AttnParams& p, float raw, float dp, float lse2, float delta, int b,
                                               int h, int q, int kv, bool call_buffer_grad, float& p_out,
                                               float& ds_out, float given_u = 0.f, bool mask_on = true) {
  const bool in_bounds = kInB || (q < p.L && kv < p.S);
  const int qw = (kInB ? q : wrap_index(q, p.L)) + p.q_offset;
  const int kvw = (kInB ? kv : wrap_index(kv, p.S)) + p.kv_offset;
  const float s = raw * p.scale;
  float sm = s;
  if constexpr (kGivenU) sm = given_u;
  else if constexpr (V::kHasScoreMod) sm = V::score_mod(p.mod, s, b, h, qw, kvw);
  bool keep = in_bounds;
  // Short-circuit on purpose (edge tiles only; interior tiles come with kInB, where keep is a constant):
  // evaluated for every entry, the masks' loads of a whole tile were live at once and the sm90 first
  // kernel spilled 40 bytes (stores and loads each) with the document mask at D=64 (ptxas 13.0, session 11).
  if constexpr (!kFull && V::kHasMaskMod) keep = keep && (!mask_on || V::mask_mod(p.mod, b, h, qw, kvw));
  const float pv = keep ? fast_exp2(sm * kLog2e - lse2) : 0.f;
  const float g = keep ? pv * (dp - delta) : 0.f;
  float ds = g;
  if constexpr (V::kHasScoreMod) ds = keep ? V::score_grad(p.mod, s, b, h, qw, kvw, g) : 0.f;
  if constexpr (V::kHasBufferGrad && !kBgValue) {
    if (call_buffer_grad && keep) V::buffer_grad(p.mod, s, b, h, qw, kvw, g);
  }
  p_out = pv;
  ds_out = ds;
  if constexpr (kBgValue) return keep ? V::buffer_grad_value(p.mod, s, b, h, qw, kvw, g) : 0.f;
}

// Row lse in log2 units as the backward uses it.
__device__ __forceinline__ float lse_to_log2(float lse_natural) {
  return lse_natural == neg_inf() ? pos_inf() : lse_natural * kLog2e;
}

}  // namespace flexattn::kern
