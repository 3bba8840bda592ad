#pragma once
// Buffer gradients of the sm90 backward summed inside the warp before the atomics
// (FLEXATTN_SM90_BWD_BG_REDUCE, a #define the host puts into the generated source; docs/env_vars.md).
//
// Per entry the backward adds g * d score_mod / d load into buf_grad at the load's index. For a
// relative bias (bias[h, q_idx - kv_idx + S - 1]) that is one atomic per entry: 8192 per 128 x 64 tile,
// and in the SASS every bias gather of the element loop then waits behind the previous entry's RED
// (ptxas cannot move a load above an atomic that may alias it): on the H200 profile (B=2 H=16 S=2048
// D=128) the FFMAs that consume the gathers took 32 % of the stall samples, long scoreboard.
// Codegen marks the variants whose one gradient index depends on (q_idx, kv_idx) only through
// q_idx - kv_idx (kBufferGradReduce == 2) or not at all (== 1) (ir::position_dependence). For those
// the element loop only accumulates buffer_grad_value per entry into 18 per-thread partial sums (one
// per diagonal class, kernels/common/diag_reduce.cuh), and after it each warp reduces them over its
// 16 x 64 part (20 shuffles); for == 2 the four warps of a consumer warpgroup then combine their sums in
// shared memory and call buffer_grad_add once per warpgroup diagonal (bg_wg_*: at most 127 atomics per
// warpgroup and tile; bg_flush, at most 79 per warp, where no scratch is set up), for == 1 a warp sum and
// one atomic. The sums skip zeros (masked or out-of-bounds diagonals).
// Semantics are the per-entry path's: the same contributions, fp32, summed in a fixed order inside the
// warp (and warpgroup) (atomics between warps and CTAs stay unordered, as before); a contribution is 0 where the
// per-entry path made no call (masked, out of bounds), and adding 0 changes no value but -0.
#include "common/diag_reduce.cuh"
#include "common/numeric.cuh"
#include "common/params.h"
#include "common/variant.cuh"
#include "sm80/scores_sm80.cuh"
#include "sm90/bwd_tile_kind_sm90.cuh"
#include "sm90/ptx/smem.cuh"
#include "sm90/tile_config_sm90_bwd.h"

#ifndef FLEXATTN_SM90_BWD_BG_REDUCE
#define FLEXATTN_SM90_BWD_BG_REDUCE 0
#endif

namespace flexattn::kern::sm90 {

FLEXATTN_VARIANT_HOOK(BgReduceOf, kBufferGradReduce, int, 0)

// 0: the variant's per-entry buffer_grad; 1: one sum per warp and tile; 2: one per diagonal.
template <class V>
__host__ __device__ constexpr int bg_reduce() {
  return (FLEXATTN_SM90_BWD_BG_REDUCE && V::kHasBufferGrad) ? BgReduceOf<V>::value : 0;
}

// The element-wise step on one warpgroup's 64 x 64 tile (st: raw S^T -> P^T, dpt: dP^T -> dS^T, the
// consumers' layout: kv rows kv_row + 8 (e >> 1), query columns q0 + 8i + 2t + (e & 1)), with the
// buffer-gradient contributions summed into bg (diag_accumulate, or bg[0] for kBufferGradReduce 1).
template <class V, bool kFull, bool kInB>
__device__ __forceinline__ void bg_tile(float (&st)[32], float (&dpt)[32], float (&bg)[kDiagPartials],
                                        const AttnParams& p, unsigned s_lse, unsigned s_delta, int b, int h, int q0,
                                        int kv_row, int t, bool mask_on = true) {
#pragma unroll
  for (int j = 0; j < kDiagPartials; ++j) bg[j] = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float lse2[2], del[2];
    ld_shared_v2_f32(s_lse + 4 * (8 * i + 2 * t), lse2[0], lse2[1]);
    ld_shared_v2_f32(s_delta + 4 * (8 * i + 2 * t), del[0], del[1]);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int kv = kv_row + 8 * (e >> 1), q = q0 + 8 * i + 2 * t + (e & 1);
      if constexpr (!kInB) {
        backward_entry<V, kFull>(p, st[4 * i + e], dpt[4 * i + e], lse2[e & 1], del[e & 1], b, h, q, kv, true,
                                 st[4 * i + e], dpt[4 * i + e], 0.f, mask_on);
      } else {
        // backward_entry with kBgValue: the contribution returned for the sums instead of added.
        const float c = backward_entry<V, kFull, kInB, true>(p, st[4 * i + e], dpt[4 * i + e], lse2[e & 1],
                                                             del[e & 1], b, h, q, kv, true, st[4 * i + e],
                                                             dpt[4 * i + e]);
        if constexpr (bg_reduce<V>() == 2)
          diag_accumulate(bg, i, e, c);
        else
          bg[0] += c;
      }
    }
  }
}

// bg_tile as a dispatch_tile_kind step.
FLEXATTN_TILE_KIND_STEP(BgTileStep, bg_tile)

// The warp's sums into buf_grad: kv_warp0 is the warp's first kv row (local), q0 the tile's first query
// (local). Diagonal q - kv = (q0 - kv_warp0) + (column - row): the index is taken at the representative
// (q0 + column - row, kv_warp0) in the mods' coordinates (plus q_offset / kv_offset), which lies on it.
template <class V>
__device__ __forceinline__ void bg_flush(const float (&bg)[kDiagPartials], const AttnParams& p, int b, int h, int q0,
                                         int kv_warp0, int lane) {
  constexpr int kKind = bg_reduce<V>();
  const int qr = q0 + p.q_offset, kvr = kv_warp0 + p.kv_offset;
  if constexpr (kKind == 1) {
    const float s = warp_sum(bg[0], lane, WarpShfl{});
    if (lane == 0 && s != 0.f) V::buffer_grad_add(p.mod, b, h, qr, kvr, s);
  } else if constexpr (kKind == 2) {
    const DiagSums d = diag_reduce_warp(bg, lane, WarpShfl{});
#pragma unroll
    for (int u = 0; u < 2; ++u) {
#pragma unroll
      for (int cb = 0; cb < 2; ++cb) {
        const float v = d.out[u][cb];
        if (u < d.n && v != 0.f) V::buffer_grad_add(p.mod, b, h, qr + diag_of(d, u, cb, lane), kvr, v);
      }
    }
  }
}

// Warpgroup sums (kBufferGradReduce == 2): a warp's 79 diagonal sums go to a scratch of the warpgroup (bg_wg_store),
// and after a barrier thread j < 127 of the warpgroup adds the four warps' sums of warpgroup diagonal j - 63 in warp
// order (bg_wg_flush): 127 adds per warpgroup and tile where the warps made 4 x 79 (session 34, H100 ncu of the
// deterministic learnable relbias backward at D = 64: the 64-bit exact adds' flush took 14 % of the stall samples and
// ~210 M of 868 M instructions). The first kernel keeps a scratch per stage (BwdCfg::kBgScratch) and adds a tile's
// sums one tile later, after the next tile's dS^T barriers (bwd_consumer_sm90.cuh); the v2 kernel uses the stage's
// dS^T tile before it is written, between two barriers of its own (bwd_consumer_v2_sm90.cuh). Scratch
// (kSm90BwdBgBufBytes): slot k of warp w at 4 (80 w + k) is warp diagonal k - 16 (slot 0 is the reduction's
// always-zero slot), then q0, b, h, the warpgroup's first kv row.
static_assert(kSm90BwdBgWarpSlots == kWgDiagSlots, "one slot per warp diagonal -16 .. 63");

template <class V>
__device__ __forceinline__ void bg_wg_store(const float (&bg)[kDiagPartials], unsigned buf, int b, int h, int q0,
                                            int kv_wg0, int warp, int lane) {
  const DiagSums d = diag_reduce_warp(bg, lane, WarpShfl{});
  const unsigned w = buf + 4 * kSm90BwdBgWarpSlots * warp;
#pragma unroll
  for (int u = 0; u < 2; ++u) {
#pragma unroll
    for (int cb = 0; cb < 2; ++cb)
      if (u < d.n) st_shared_f32(w + 4 * wg_slot_of_warp_diag(diag_of(d, u, cb, lane)), d.out[u][cb]);
  }
  if (warp == 0 && lane == 0) {
    const unsigned head = buf + 4 * 4 * kSm90BwdBgWarpSlots;
    st_shared_s32(head, q0);
    st_shared_s32(head + 4, b);
    st_shared_s32(head + 8, h);
    st_shared_s32(head + 12, kv_wg0);
  }
}

template <class V>
__device__ __forceinline__ void bg_wg_flush(const AttnParams& p, unsigned buf, int tid) {
  if (tid >= 127) return;
  const int dg = tid - 63;  // warpgroup diagonal: column - row from the warpgroup's row 0, column 0
  float s = 0.f;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const int k = warp_slot_of_wg_diag(dg, w);
    if (k >= 1 && k < kSm90BwdBgWarpSlots) s += ld_shared_f32(buf + 4 * (kSm90BwdBgWarpSlots * w + k));
  }
  if (s == 0.f) return;
  const unsigned head = buf + 4 * 4 * kSm90BwdBgWarpSlots;
  const int q0 = ld_shared_s32(head), b = ld_shared_s32(head + 4), h = ld_shared_s32(head + 8);
  const int kv_wg0 = ld_shared_s32(head + 12);
  V::buffer_grad_add(p.mod, b, h, q0 + p.q_offset + dg, kv_wg0 + p.kv_offset, s);
}

}  // namespace flexattn::kern::sm90
