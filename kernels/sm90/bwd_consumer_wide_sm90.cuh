#pragma once
// Consumer warpgroup of the sm90 backward's wide kernel (D = Dv = 256; tile_config_sm90_bwd.h, "Wide head dims").
// The CTA owns a 64-row kv tile; both consumer warpgroups hold all 64 kv rows and split every GEMM by columns
// (bwd_gemm_sm90.cuh, "Wide kernel"), so a thread keeps 64 dK + 64 dV accumulators (head-dim columns 128 w ..
// 128 w + 127) instead of the 256 that a whole row would need. Per query tile (one stage, from the producer):
//   1. S^T_w = K Q_w^T and dP^T_w = V dO_w^T for this warpgroup's 32 query columns (32 w ..), wait;
//   2. the element-wise backward on those 64 x 32 entries (bwd_tile_scores, the other kernels' per-entry
//      definition and tile kinds);
//   3. P^T and dS^T rounded into this warpgroup's half of the tile pair n % 2 (n: the query tile's index),
//      fence, one 256-thread barrier: both halves are in shared memory;
//   4. dV_w += P^T dO_w, dK_w += dS^T Q_w (one group), dQ_w = dS K_w (a second); wait for the first and release
//      the stage (the producer loads the next Q / dO while dQ runs); wait for dQ and store it into its 128
//      columns of the dQ tile, which the writer warp adds into dq_accum with TMA reductions (v3).
// The pair n % 2 is rewritten at tile n + 2, after the barrier of tile n + 1, which each warpgroup reaches only
// after the wait that retired its GEMMs of tile n: one barrier per tile suffices (the v2's argument).
// Deterministic mode without the ordered dQ (always here): do_dq is false, the sm80 dQ pass computes dQ.
#include "common/numeric.cuh"
#include "common/params.h"
#include "common/variant.cuh"
#include "sm90/bwd_consumer_sm90.cuh"
#include "sm90/bwd_gemm_sm90.cuh"
#include "sm90/bwd_layout_sm90.cuh"
#include "sm90/ptx/fence.cuh"
#include "sm90/ptx/mbarrier.cuh"
#include "sm90/ptx/smem.cuh"
#include "sm90/ptx/wgmma.cuh"

namespace flexattn::kern::sm90 {

// This warpgroup's 32 columns of P^T (pt) and dS^T (dst) rounded into the tile pair: the pair (row, 32 w + 8 i
// + 2 t) lands in 16-byte chunk (4 w + i) ^ (row % 8) of the 128-byte row (the 128B swizzle), so the 8 rows of
// a warp's store hit 8 distinct chunks.
template <class T>
__device__ __forceinline__ void store_p_ds_wide(const float (&pt)[16], const float (&dst)[16], unsigned p_tile,
                                                unsigned ds_tile, int wg, int warp, int g, int t) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = 16 * warp + g + 8 * r;
      const unsigned at = row * 128 + (((4 * wg + i) ^ (row & 7)) << 4) + 4 * t;
      st_shared_u32(p_tile + at, Num<T>::pack(pt[4 * i + 2 * r], pt[4 * i + 2 * r + 1]));
      st_shared_u32(ds_tile + at, Num<T>::pack(dst[4 * i + 2 * r], dst[4 * i + 2 * r + 1]));
    }
  }
}

template <class V, class T, int D, int Dv>
__device__ __forceinline__ void bwd_consumer_wide(const AttnParams& p, const BwdCfg<D, Dv, true, false, true>& c,
                                                  int wg, int kv0, int hk, int bz) {
  using C = BwdCfg<D, Dv, true, false, true>;
  static_assert(C::kWide && C::ST == 1 && C::BN == 64, "the wide kernel's layout");
  const int tid = threadIdx.x & 127, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const unsigned k_tile = c.k_half(0), v_tile = c.v_half(0);
  const unsigned k_cols = k_tile + 2 * wg * C::kSlabBytes;  // K columns 128 w .. (dQ_w's B operand)
  const bool do_dq = bwd_adds_dq<true, false>(p);
  const int kv_row = kv0 + 16 * warp + g;
  const bool kv_in = kv0 + C::BN <= p.S;
  RingPos pos{0, 0u};
  DqRing<C::DQB> dqr;  // the one dQ buffer's phase (flips every tile)
  int n = 0;           // parity of the query tile: its P^T / dS^T pair

  float dk[64], dv[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) dk[i] = 0.f, dv[i] = 0.f;

  mbar_wait(c.bar_kv(), 0u);
  while (true) {
    mbar_wait(c.full(pos.stage), pos.phase);
    const unsigned info = c.info(pos.stage);
    const int q0 = ld_shared_s32(info);
    if (q0 < 0) {
      if (do_dq) dq_end_marker_one_buffer(c, dqr.stage(), dqr.phase(), wg, tid);
      break;
    }
    const int h = ld_shared_s32(info + 4), b = ld_shared_s32(info + 8);
    const bool full = ld_shared_s32(info + 12) != 0 || !V::kHasMaskMod;  // as the v2: no mask_mod, no partial tiles
    const bool inb = kv_in && q0 + C::BM <= p.L;
    const unsigned q_tile = c.q_tile(pos.stage), do_tile = c.do_tile(pos.stage);

    float st[16], dpt[16];
    issue_sdp<T, D, Dv>(st, dpt, k_tile, v_tile, q_tile + 32 * wg * 128, do_tile + 32 * wg * 128);
    wgmma_wait<0>();
    fence_operands(st);
    fence_operands(dpt);
    dispatch_tile_kind<true, true, TileScoresStep<V>>(inb, full, st, dpt, p, p.scale * kLog2e,
                                                      c.lse(pos.stage) + 4 * 32 * wg, c.delta(pos.stage) + 4 * 32 * wg,
                                                      b, h, q0 + 32 * wg, kv_row, t);
    const unsigned p_tile = c.p_tile_wide(n), ds_tile = c.ds_tile_wide(n);
    store_p_ds_wide<T>(st, dpt, p_tile, ds_tile, wg, warp, g, t);
    // Both halves (all 256 threads' stores) must reach the async proxy before either warpgroup's GEMMs read them.
    fence_proxy_async_smem();
    named_bar_sync(kBarPdSV2, 256);
    issue_dkdv_wide<T>(dk, dv, p_tile, ds_tile, q_tile + 2 * wg * C::kSlabBytes, do_tile + 2 * wg * C::kSlabBytes);
    if (do_dq) {
      float dq[64];
      issue_dq<T, 128>(dq, ds_tile, k_cols);
      wgmma_wait<1>();  // dV and dK retired: Q, dO, lse and delta of the stage are no longer read by this warp
      fence_operands(dk);
      fence_operands(dv);
      if (lane == 0) mbar_arrive(c.empty(pos.stage));
      wgmma_wait<0>();
      fence_operands(dq);
      dq_cols_to_smem(c, dqr.stage(), dqr.phase(), wg, dq, q0, b * p.Hq + h, tid, warp, g, t);
      ++dqr.n;
    } else {  // deterministic mode: the sm80 pass computes dQ
      wgmma_wait<0>();
      fence_operands(dk);
      fence_operands(dv);
      if (lane == 0) mbar_arrive(c.empty(pos.stage));
    }
    pos.template advance<C::ST>();
    n ^= 1;
  }

  // dK = scale * dS^T Q and dV as accumulated: this warpgroup's 128 columns, rows < S.
  if (FLEXATTN_SM90_BWD_TMA_STORE && p.dkv_tma != 0)
    store_dk_dv_tma<T, 128, 128>(p, k_tile + 2 * wg * C::kSlabBytes, v_tile + 2 * wg * C::kSlabBytes, dk, dv, wg,
                                 tid, warp, g, t, 2 * wg, kv0, hk, bz);
  else
    store_dk_dv<T, 128, 128>(p, dk, dv, bz, hk, kv_row, t, 128 * wg);
}

}  // namespace flexattn::kern::sm90
