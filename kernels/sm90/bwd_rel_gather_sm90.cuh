#pragma once
// Relative-position-bias score_mods (codegen's kRelGather: score_mod = score + row(b, h)[sg (q - kv) + c], f32) in
// the sm90 backward's recompute of P, as the forward's scores_inside_rel_gather (fwd_softmax_sm90.cuh): a thread's
// entries of a transposed tile (rel_affine_sm90.cuh's layout: entry (i, e) is query column q0 + 8i + 2t + (e & 1),
// kv row kv_row + 8 (e >> 1)) read the row at sg (8 (i - (e >> 1)) + (e & 1)) + base, so R entries take
// R / 2 + 2 loads at immediate offsets of one pointer (R = 32: 18 instead of 32 gathers with their own index, clamp
// and 64-bit address). Per entry it leaves one FFMA: u = raw * scale + row[...], which rounds like the forward's.
//
// Measured before it (H200, session 15, B=2 H=16 S=8192 D=128): the constant relative bias with a causal mask
// compiled four backward kernels (each spilled 56-64 bytes, ptxas 13.0; get_kernel_set's chain of fallbacks) and
// ran at 343 TFLOP/s against causal's 551.
//
// Indices are score_mod's own: each clamped as codegen clamps them (fa_clamp_index32) unless the warp's whole range
// lies inside the row (`fast`, one vote per tile), where the clamp is the identity. Entries past L or S read clamped
// entries of unwrapped positions: backward_entry zeroes them (in_bounds), as it does every out-of-bounds entry.
// Learnable rows (buffer gradients) keep the general form: their buffer_grad needs the per-entry positions.
#include "common/params.h"
#include "common/variant.cuh"
#include "sm90/rel_affine_sm90.cuh"

namespace flexattn::kern::sm90 {

template <class V>
__device__ __forceinline__ constexpr bool bwd_rel_gather() {
  return use_rel_gather<V>() && !V::kHasBufferGrad;
}

// One tile's row pointer and base index. The loop over a thread's entries walks j = i - (e >> 1) upwards, so
// entry row i needs the values of j = i - 1 and i: two loads per row of entries, the previous two kept (load),
// instead of all R / 2 + 2 live at once (held together they pushed the causal kernel at D = 128 over its
// registers: 4-16 spilled bytes, ptxas 13.0).
struct BwdRelGather {
  const float* row = nullptr;
  long long base = 0;
  int n = 0;
  bool fast = false;  // the warp's whole range lies inside the row: no clamp

  template <class V, int R>
  __device__ __forceinline__ static BwdRelGather of(const AttnParams& p, int b, int h, int q0, int kv_row, int t) {
    BwdRelGather r;
    if constexpr (bwd_rel_gather<V>()) {
      int c;
      r.row = V::rel_gather(p.mod, b, h, c, r.n);
      constexpr int sg = RelGatherOf<V>::value;
      r.base = sg * ((long long)(q0 + 2 * t + p.q_offset) - (long long)(kv_row + p.kv_offset)) + c;
      const long long lo = r.base + (sg > 0 ? -8 : 7 - 2 * R), hi = r.base + (sg > 0 ? 2 * R - 7 : 8);
      r.fast = __all_sync(0xffffffffu, lo >= 0 && hi < r.n);
    }
    return r;
  }

  // v[d] = row[base + sg (8 j + d)], d = 0, 1.
  template <class V>
  __device__ __forceinline__ void load(float (&v)[2], int j) const {
    constexpr int sg = RelGatherOf<V>::value;
#pragma unroll
    for (int d = 0; d < 2; ++d) {
      const int off = sg * (8 * j + d);
      v[d] = __ldg(fast ? row + base + off : row + fa_clamp_index32(int(base + off), n));
    }
  }
};

}  // namespace flexattn::kern::sm90
