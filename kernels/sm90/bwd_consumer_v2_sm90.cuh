#pragma once
// Consumer warpgroup of the sm90 backward v2 (opt-in FLEXATTN_SM90_BWD_V2, template argument kV2 of
// attn_bwd_sm90; D = 128). Same walk, stages, producer, dK / dV epilogue and semantics as the default
// consumer (bwd_consumer_sm90.cuh); the per-tile schedule is FlashAttention-3's (hopper.md section 3):
//   1. S^T = K_w Q^T and dP^T = V_w dO^T in two commit groups; for variants without a score_mod
//      wait for S^T only and compute P = exp2(raw * scale*log2e - lse2) while dP^T still runs, then
//      wait for dP^T and form dS = P (dP - delta); with a score_mod both at once (score_grad needs s);
//   2. P^T and dS^T rounded into A-operand registers; issue dV += P^T dO (RS);
//   3. dS^T stored into this warpgroup's tile of the stage's pair, fence, one 256-thread barrier
//      (both tiles ready); issue dQ_w = dS K[:, 64 w ..] over all 128 kv rows (n64: this warpgroup's
//      half of dQ's columns), then dK += dS^T Q (RS: dS^T from registers, no shared-memory read);
//   4. wait for dV and dQ, add dQ into dq_accum (red.global.add.v2.f32) while dK still runs; wait,
//      release the stage.
// What it removes against the default: the dK GEMM's dS^T read from shared memory, half of the dQ
// atomics (each CTA adds one dQ partial per query row instead of one per warpgroup), the per-warpgroup
// barrier pair (one 256-thread barrier per tile instead), 32 dQ accumulator registers, and the
// serialization of dQ after dV / dK (dV overlaps the dS^T stores and the barrier, dK the atomics).
// Interior tiles (full, query rows < L, kv rows < S) skip the bounds tests and index wrapping.
//
// dS^T tiles: [stage][warpgroup] (tile_config_sm90_bwd.h, v2 layout). Warpgroup X's dQ of tile n reads
// both tiles of stage n % 2; they are rewritten at tile n + 2, after X passes the barrier of tile n + 1,
// which the other warpgroup reaches only after its own wait that retired its dQ of tile n. Each
// warpgroup retires its own GEMMs of tile n (wait_group 0) before its stores of tile n + 1, so one
// barrier per tile suffices.
#include "common/numeric.cuh"
#include "common/params.h"
#include "common/variant.cuh"
#include "sm80/scores_sm80.cuh"
#include "sm90/bwd_buffer_grad_sm90.cuh"
#include "sm90/bwd_consumer_sm90.cuh"
#include "sm90/bwd_gemm_sm90.cuh"
#include "sm90/bwd_layout_sm90.cuh"
#include "sm90/bwd_tile_kind_sm90.cuh"
#include "sm90/ptx/fence.cuh"
#include "sm90/ptx/mbarrier.cuh"
#include "sm90/ptx/smem.cuh"
#include "sm90/ptx/wgmma.cuh"

namespace flexattn::kern::sm90 {


// Split schedule, step 1: st (raw S^T) becomes P^T.
template <class V, bool kFull, bool kInB>
__device__ __forceinline__ void tile_p_v2(float (&st)[32], const AttnParams& p, float scale_log2, unsigned s_lse, int b,
                                          int h, int q0, int kv_row, int t, bool mask_on = true) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float lse2[2];
    ld_shared_v2_f32(s_lse + 4 * (8 * i + 2 * t), lse2[0], lse2[1]);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int kv = kv_row + 8 * (e >> 1), q = q0 + 8 * i + 2 * t + (e & 1);
      st[4 * i + e] = bwd_p_entry<V, kFull, kInB>(p, st[4 * i + e], scale_log2, lse2[e & 1], b, h, q, kv, mask_on);
    }
  }
}

// v3 (kT): the tile's 16 lse2 (or delta) values of this thread's query columns (8 i + 2 t, + 1), loaded
// before the wgmma_wait that precedes their use: in the session-5 profile the first FFMA of tile_p_v2
// waited on its LDS (short_sb) for ~6 % of all samples, the loads being issued only after the wait.
__device__ __forceinline__ void load_cols_v2(float (&v)[16], unsigned s_vec, int t) {
#pragma unroll
  for (int i = 0; i < 8; ++i) ld_shared_v2_f32(s_vec + 4 * (8 * i + 2 * t), v[2 * i], v[2 * i + 1]);
}

// tile_p_v2 with the lse2 values already in registers.
template <class V, bool kFull, bool kInB>
__device__ __forceinline__ void tile_p_v2r(float (&st)[32], const AttnParams& p, float scale_log2,
                                           const float (&lse2)[16], int b, int h, int q0, int kv_row, int t,
                                           bool mask_on = true) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int kv = kv_row + 8 * (e >> 1), q = q0 + 8 * i + 2 * t + (e & 1);
      st[4 * i + e] =
          bwd_p_entry<V, kFull, kInB>(p, st[4 * i + e], scale_log2, lse2[2 * i + (e & 1)], b, h, q, kv, mask_on);
    }
  }
}

// tile_p_v2 and tile_p_v2r as dispatch_tile_kind steps.
FLEXATTN_TILE_KIND_STEP(TilePStep, tile_p_v2)
FLEXATTN_TILE_KIND_STEP(TilePRegsStep, tile_p_v2r)

// tile_ds_v2 with the delta values already in registers.
__device__ __forceinline__ void tile_ds_v2r(const float (&pt)[32], float (&dpt)[32], const float (&del)[16]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dpt[4 * i + e] = pt[4 * i + e] * (dpt[4 * i + e] - del[2 * i + (e & 1)]);
  }
}

// Split schedule, step 2: dpt (dP^T) becomes dS^T = P (dP - delta) (0 where P is 0: masked, out of
// bounds, or a fully masked row with lse2 = +inf).
__device__ __forceinline__ void tile_ds_v2(const float (&pt)[32], float (&dpt)[32], unsigned s_delta, int t) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float del[2];
    ld_shared_v2_f32(s_delta + 4 * (8 * i + 2 * t), del[0], del[1]);
#pragma unroll
    for (int e = 0; e < 4; ++e) dpt[4 * i + e] = pt[4 * i + e] * (dpt[4 * i + e] - del[e & 1]);
  }
}

// P^T and dS^T rounded into A-operand registers (k-step ks uses a[4ks .. 4ks+3]; ptx/wgmma.cuh).
template <class T>
__device__ __forceinline__ void pack_v2(unsigned (&pa)[16], unsigned (&dsa)[16], const float (&pt)[32],
                                        const float (&dst)[32]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      pa[2 * i + r] = Num<T>::pack(pt[4 * i + 2 * r], pt[4 * i + 2 * r + 1]);
      dsa[2 * i + r] = Num<T>::pack(dst[4 * i + 2 * r], dst[4 * i + 2 * r + 1]);
    }
  }
}

// The rounded dS^T into this warpgroup's swizzled [64 kv][64 q] tile (round_p_ds's addressing: the pair
// (row, 8i+2t) in 16-byte chunk i ^ (row % 8), no bank conflicts).
__device__ __forceinline__ void store_ds_v2(const unsigned (&dsa)[16], unsigned ds_tile, int warp, int g, int t) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = 16 * warp + g + 8 * r;
      st_shared_u32(ds_tile + row * 128 + ((i ^ (row & 7)) << 4) + 4 * t, dsa[2 * i + r]);
    }
  }
}

// This warpgroup's 64 columns of the CTA's dQ partial into dq_accum rows < L (fp32, unscaled).
template <int D>
__device__ __forceinline__ void add_dq_v2(const AttnParams& p, const float (&dq)[32], int b, int h, int q0, int wg,
                                          int warp, int g, int t) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int q = q0 + 16 * warp + g + 8 * r;
    if (q < p.L) {
      float* row = p.dq_accum + (((long long)b * p.Hq + h) * p.L + q) * D + 64 * wg + 2 * t;
#pragma unroll
      for (int i = 0; i < 8; ++i) red_add_v2_f32(row + 8 * i, dq[4 * i + 2 * r], dq[4 * i + 2 * r + 1]);
    }
  }
}

// kP (kPersistent, FLEXATTN_SM90_BWD_PERSISTENT): the whole body runs once per work tile (tile loop
// below); kv0, hk, bz come from the producer's kv_info instead of the arguments.
template <class V, class T, int D, int Dv, bool kB, bool kT = false, bool kP = false>
__device__ __forceinline__ void bwd_consumer_v2(const AttnParams& p, const BwdCfg<D, Dv, kB, true, kT>& c, int wg,
                                                int kv0, int hk, int bz) {
  using C = BwdCfg<D, Dv, kB, true, kT>;
  static_assert(sm90_bwd_v2_head_dims_ok(D, Dv), "backward v2: D = 128 (one 64-column dQ slab per warpgroup)");
  // Split schedule (P while dP^T runs) only without score_mod / buffer_grad (they need the raw score
  // next to dP), and only with the 240 consumer registers of the bulk dQ path: at 232 ptxas 13.0
  // serialized every wgmma of the kernel (C7512) and spilled 16 bytes (identity and causal, D128).
  constexpr bool kSplit = sm90_bwd_consumer_regs(kB, true) >= 240 && !V::kHasScoreMod && !V::kHasBufferGrad;
  // Partial (masked) tiles inside [0, L) x [0, S) get their own path without bounds tests, also only with
  // 240 registers: at 232 the extra path spilled 16 bytes for dilated:3 (ptxas 13.0).
  constexpr bool kPartialInB = sm90_bwd_consumer_regs(kB, true) >= 240;
  // Edge tiles (the last query or kv tile of a head: few) full or partial in one copy of the element-wise step, with
  // the mask a run-time choice (mask_on): one copy fewer to compile (session 26: backward compile -3-5 % locally),
  // also only with 240 registers: at 232 softcap + causal spilled 80 bytes (ptxas 13.0).
  constexpr bool kMergeEdges = kPartialInB;
  // Buffer gradients summed per warp (bwd_buffer_grad_sm90.cuh), with the 240 registers of the bulk dQ
  // path only: at 232 the 18 partial sums spilled 32 bytes for t5 (ptxas 13.0).
  constexpr int kBg = sm90_bwd_consumer_regs(kB, true) >= 240 ? bg_reduce<V>() : 0;
  const int tid = threadIdx.x & 127, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const unsigned k_half = c.k_half(wg), v_half = c.v_half(wg);
  const unsigned k0_slab = c.k_half(0) + wg * C::kSlabBytes, k1_slab = c.k_half(1) + wg * C::kSlabBytes;
  const bool do_dq = bwd_adds_dq<kB, kP>(p);
  const float scale_log2 = p.scale * kLog2e;
  RingPos pos{0, 0u};
  DqRing<C::DQB> dqr;  // bulk dQ: the buffer and phase of the next tile
  // kP: parity of bar_kv's next phase (from kv_info at each tile's end, so that neither it nor kv0 stays
  // live through the query-tile loop: with them the score_mod variants spilled 200-250 bytes at 240
  // registers, NVRTC 13.0).
  unsigned kv_phase = 0u;
  while (true) {  // kP: one pass per work tile; otherwise one pass
  if constexpr (kP) {
    mbar_wait(c.bar_kv(), kv_phase);
    kv0 = ld_shared_s32(bwd_kv_info(c));
    if (kv0 < 0) {
      if constexpr (kB) {
        if (do_dq) dq_end_marker_one_buffer(c, dqr.stage(), dqr.phase(), wg, tid);
      }
      break;
    }
  }
  int kv_row = kv0 + 64 * wg + 16 * warp + g;
  bool kv_in = kv0 + C::BN <= p.S;

  float dk[D / 2], dv[Dv / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dk[i] = 0.f;
#pragma unroll
  for (int i = 0; i < Dv / 2; ++i) dv[i] = 0.f;

  if constexpr (!kP) mbar_wait(c.bar_kv(), 0u);
  while (true) {
    mbar_wait(c.full(pos.stage), pos.phase);
    const unsigned info = c.info(pos.stage);
    const int q0 = ld_shared_s32(info);
    if (q0 < 0) {
      if constexpr (kP) {  // this warp's GEMMs of the tile retired: see bwd_finish_work_tile
        bwd_finish_work_tile<C::ST>(c, pos, wg * 64 + 16 * warp + g, lane, hk, bz, kv_row, kv_phase);
      } else if constexpr (kB) {
        if (do_dq) {  // one end marker per dQ writer (bwd_dq_writer), in the ring's next positions
          for (int k = 0; k < bwd_dq_writer_count(bwd_dq_ordered<kB, kP>(p)); ++k)
            dq_end_marker_one_buffer(c, dqr.stage(unsigned(k)), dqr.phase(unsigned(k)), wg, tid);
        }
      }
      break;
    }
    if constexpr (kP) {  // kv0 again from kv_info (see kv_phase)
      kv0 = ld_shared_s32(bwd_kv_info(c));
      kv_row = kv0 + 64 * wg + 16 * warp + g;
      kv_in = kv0 + C::BN <= p.S;
    }
    const int h = ld_shared_s32(info + 4), b = ld_shared_s32(info + 8);
    // Without a mask_mod every tile is a full one: with no block mask at all (dense, relbias) the walker
    // reports each tile as partial, which would keep those off the interior path.
    const bool full = ld_shared_s32(info + 12) != 0 || !V::kHasMaskMod;
    const bool inb = kv_in && q0 + C::BM <= p.L;
    const unsigned q_tile = c.q_tile(pos.stage), do_tile = c.do_tile(pos.stage);
    const unsigned s_lse = c.lse(pos.stage), s_delta = c.delta(pos.stage);

    float st[32], dpt[32], bg[kDiagPartials];
    issue_s_dp_v2<T, D, Dv>(st, dpt, k_half, v_half, q_tile, do_tile);
    if constexpr (kSplit && kT) {
      float lse2[16];
      load_cols_v2(lse2, s_lse, t);
      wgmma_wait<1>();  // S^T retired; dP^T may still run
      fence_operands(st);
      dispatch_tile_kind<kPartialInB, kMergeEdges, TilePRegsStep<V>>(inb, full, st, p, scale_log2, lse2, b, h, q0,
                                                                     kv_row, t);
      float del[16];
      load_cols_v2(del, s_delta, t);
      wgmma_wait<0>();
      fence_operands(dpt);
      tile_ds_v2r(st, dpt, del);
    } else if constexpr (kSplit) {
      wgmma_wait<1>();  // S^T retired; dP^T may still run
      fence_operands(st);
      dispatch_tile_kind<kPartialInB, kMergeEdges, TilePStep<V>>(inb, full, st, p, scale_log2, s_lse, b, h, q0, kv_row,
                                                                 t);
      wgmma_wait<0>();
      fence_operands(dpt);
      tile_ds_v2(st, dpt, s_delta, t);
    } else {
      wgmma_wait<0>();
      fence_operands(st);
      fence_operands(dpt);
      if constexpr (kBg != 0)
        dispatch_tile_kind<kPartialInB, kMergeEdges, BgTileStep<V>>(inb, full, st, dpt, bg, p, s_lse, s_delta, b, h, q0,
                                                                    kv_row, t);
      else
        dispatch_tile_kind<kPartialInB, kMergeEdges, TileScoresStep<V>>(inb, full, st, dpt, p, scale_log2, s_lse,
                                                                        s_delta, b, h, q0, kv_row, t);
    }
    if constexpr (kBg == 2) {
      // Summed per warpgroup (bg_wg_store / bg_wg_flush) in this stage's dS^T tile of the warpgroup, free until
      // store_ds_v2 below: its last readers are the GEMMs of this stage's previous tile (both warpgroups' dQ
      // GEMMs read it), and every consumer warp retired those (wgmma_wait<0>) before its arrival on the stage's
      // empty barrier, which the producer awaits before the refill that this tile's full barrier announced. One
      // add per thread where the warps made four; the two barriers order the stores before the reads and the
      // reads before store_ds_v2. (Adding the warps' sums after the dQ / dK GEMM issues instead, s34d on an
      // H100: default mode 3.9 % slower at D = 128.)
      static_assert(kSm90BwdBgBufBytes <= C::kSmem.ds_tile, "the sums fit the warpgroup's dS^T tile");
      const unsigned scratch = c.ds_tile_v2(pos.stage, wg);
      bg_wg_store<V>(bg, scratch, b, h, q0, kv0 + 64 * wg, warp, lane);
      named_bar_sync(kBarDsFull0 + wg, 128);
      bg_wg_flush<V>(p, scratch, tid);
      named_bar_sync(kBarDsFull0 + wg, 128);
    } else if constexpr (kBg != 0) {
      bg_flush<V>(bg, p, b, h, q0, kv0 + 64 * wg + 16 * warp, lane);
    }
    unsigned pa[16], dsa[16];
    pack_v2<T>(pa, dsa, st, dpt);
    issue_rs_k64<T, Dv>(dv, pa, do_tile);  // dV += P^T dO
    if (do_dq) {
      store_ds_v2(dsa, c.ds_tile_v2(pos.stage, wg), warp, g, t);
      // Both warpgroups' dS^T (all 256 threads' stores) must reach the async proxy before either dQ
      // GEMM reads them.
      fence_proxy_async_smem();
      named_bar_sync(kBarPdSV2, 256);
      float dq[32];
      issue_dq_v2<T>(dq, c.ds_tile_v2(pos.stage, 0), c.ds_tile_v2(pos.stage, 1), k0_slab, k1_slab);
      issue_rs_k64<T, D>(dk, dsa, q_tile);  // dK += dS^T Q
      wgmma_wait<1>();  // dV and dQ retired; dK may still run
      fence_operands(dq);
      if constexpr (kB) {
        dq_cols_to_smem(c, dqr.stage(), dqr.phase(), wg, dq, q0, b * p.Hq + h, tid, warp, g, t);
        ++dqr.n;
      } else {
        add_dq_v2<D>(p, dq, b, h, q0, wg, warp, g, t);
      }
    } else {  // deterministic mode: the sm80 pass computes dQ
      issue_rs_k64<T, D>(dk, dsa, q_tile);  // dK += dS^T Q
    }
    wgmma_wait<0>();
    fence_operands(dk);
    fence_operands(dv);
    fence_operands(pa);
    fence_operands(dsa);
    // Q, dO, lse and delta of this stage are no longer read by this warp.
    if (lane == 0) mbar_arrive(c.empty(pos.stage));
    pos.template advance<C::ST>();
  }

  // Only with the 240 registers of the bulk dQ path (at 232 text:mixed spilled 92 bytes with it, ptxas 13.0) and not
  // with the buffer-gradient sums (kBg): there the second epilogue path reshuffled the element loop's register
  // allocation (relbias(learnable) D=128: 1,410 SASS lines differ, no spill); not measured, so those kernels stay
  // the measured ones until an A/B.
  constexpr bool kTmaEpilogue = FLEXATTN_SM90_BWD_TMA_STORE && sm90_bwd_consumer_regs(kB, true) >= 240 && kBg == 0;
  if (!kP && kTmaEpilogue && p.dkv_tma != 0)
    store_dk_dv_tma<T, D, Dv>(p, k_half, v_half, dk, dv, wg, tid, warp, g, t, 0, kv_row - 16 * warp - g, hk, bz);
  else
    store_dk_dv<T, D, Dv>(p, dk, dv, bz, hk, kv_row, t);
  if constexpr (!kP) break;
  }  // tile loop
}

}  // namespace flexattn::kern::sm90
