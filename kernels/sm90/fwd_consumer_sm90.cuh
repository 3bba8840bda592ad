#pragma once
// Consumer warpgroup of the sm90 forward (64 query rows). Schedule per kv tile j (hopper.md 2.4,
// "intra-warpgroup overlap"): issue S_j = Q K_j^T, issue O += P_{j-1} V_{j-1}, wait for S_j only,
// apply the mods and the softmax to S_j while the P V wgmma still runs, then wait for it, rescale O
// and round P_j. With ping-pong on, the consumer warpgroups (two, or three with the tall tile) take turns
// issuing their GEMMs (named barriers, round robin), so one's softmax hides under the others' tensor-core
// work (hopper.md 2.5).
//
// Every stage is released per warp right after the wgmma_wait that retired its reads. The kv tiles,
// their order and kind come from the producer's info slots, so every warpgroup sees the same
// sequence and takes the same number of turns. The CTA's tiles run back to back on one ring
// (fwd_scheduler_sm90.cuh). Default kernel: the end marker's slot is released like any other
// (fwd_producer_sm90.cuh). Persistent kernel (kPersistent): the tile itself (the producer takes it
// from the tile queue) and its kv-tile count come with its Q buffer, an end marker in the next Q buffer
// ends the CTA, no slot ends a tile, and the ping-pong token lives for the whole CTA
// (fwd_scheduler_sm90.cuh, "Handshake").
#include "common/numeric.cuh"
#include "common/params.h"
#include "common/variant.cuh"
#include "sm90/fwd_epilogue_sm90.cuh"
#include "sm90/fwd_gemm_sm90.cuh"
#include "sm90/fwd_layout_sm90.cuh"
#include "sm90/fwd_scheduler_sm90.cuh"
#include "sm90/fwd_softmax_sm90.cuh"
#include "sm90/ptx/fence.cuh"
#include "sm90/ptx/mbarrier.cuh"
#include "sm90/ptx/smem.cuh"
#include "sm90/ptx/wgmma.cuh"

namespace flexattn::kern::sm90 {

// Ping-pong turn taking among kN warpgroups; warpgroup wg waits for its token, issues, then hands the token to
// wg + 1 (mod kN). Each barrier has one giver and one taker (256 threads), and a warpgroup can give again only
// after it took again, i.e. after the whole round: at most one grant is pending on any barrier.
template <bool kOn, int kN = 2>
struct Turns {
  int wg;
  __device__ __forceinline__ void take() const {
    if constexpr (kOn) named_bar_sync(kBarSchedule0 + wg, 256);
  }
  __device__ __forceinline__ void give() const {
    // (wg ^ 1 for two: the select cost the two-warpgroup kernel instructions where it gives the turn.)
    if constexpr (kOn) named_bar_arrive(kBarSchedule0 + (kN == 2 ? wg ^ 1 : wg + 1 == kN ? 0 : wg + 1), 256);
  }
  // The last warpgroup grants the first turn; warpgroup 0 consumes the one grant left over at the end (the last
  // warpgroup's final give), so every barrier finishes with no pending arrivals whatever the number of tiles
  // (zero included). Default kernel: once per work tile; persistent kernel: once per CTA.
  __device__ __forceinline__ void start() const {
    if constexpr (kOn) {
      if (wg == kN - 1) named_bar_arrive(kBarSchedule0, 256);
    }
  }
  __device__ __forceinline__ void finish() const {
    if constexpr (kOn) {
      if (wg == 0) named_bar_sync(kBarSchedule0, 256);
    }
  }
};

__device__ __forceinline__ void release(unsigned empty_bar, int lane) {
  if (lane == 0) mbar_arrive(empty_bar);
}

// One tile of a consumer warpgroup; `it` counts the CTA's tiles, `pos` is the ring position.
// kPersistent changes only where the tile's Q and kv-tile count come from and how the kv loop ends;
// the per-kv-tile schedule is the same code for both kernels. Persistent: the caller has waited for the
// tile's Q buffer and passes its kv-tile count n (fwd_scheduler_sm90.cuh, handshake 1).
// C: the kernel's FwdCfg (fwd_layout_sm90.cuh).
template <class V, class T, class C, bool kPingPong>
__device__ __forceinline__ void fwd_consume_tile(const AttnParams& p, const C& c, int wg, const FwdTile& tile, int it,
                                                 RingPos& pos, int n = 0) {
  constexpr int D = C::D, Dv = C::Dv;
  constexpr bool kPersistent = C::kPersistent;
  const int q0 = tile.q0, b = tile.b, h = tile.h;
  constexpr int BN = C::BN;
  const int tid = threadIdx.x & 127, warp = tid >> 5, lane = tid & 31, t = lane & 3;
  const int row = q0 + 64 * wg + 16 * warp + (lane >> 2);
  const int qw[2] = {wrap_index(row, p.L) + p.q_offset, wrap_index(row + 8, p.L) + p.q_offset};
  const int qb = C::QB == 1 ? 0 : it & 1, use = C::QB == 1 ? it : it >> 1;
  const unsigned q_half = c.q_half(qb, wg);
  const Turns<kPingPong, C::WG> turns{wg};
  const float slope = rel_slope_of<V>(p, b, h);  // 0 and unused unless use_rel_affine<V>()
  const SoftcapTile sc = softcap_tile<V>(p);     // zeros and unused unless use_softcap<V>()
  const RelDiagWarp rdw = use_rel_diag<V>() ? RelDiagWarp{c.rel_table(wg, warp), row - (lane >> 2), lane} : RelDiagWarp{};

  float o[Dv / 2], s[BN / 2], m[2], l[2], alpha[2];
  unsigned pa[BN / 4];
#pragma unroll
  for (int i = 0; i < Dv / 2; ++i) o[i] = 0.f;
  m[0] = m[1] = neg_inf();
  float mr[2] = {neg_inf(), neg_inf()};  // the exponent's reference max (FLEXATTN_SM90_LAZY_RESCALE only)
  l[0] = l[1] = 0.f;

  int kv0 = -1;
  if constexpr (kPersistent) {
    if (n > 0) {
      mbar_wait(c.full_k(pos.stage), pos.phase);
      kv0 = ld_shared_s32(c.info(pos.stage));
    }
  } else {
    // Default kernel: the first turn is granted only after Q arrived: Q needs q_free, i.e. every
    // warpgroup's previous epilogue, so warpgroup 0 has consumed the previous tile's spare grant
    // (Turns::finish) by now and the two grants can never meet on one barrier.
    mbar_wait(c.bar_q(qb), unsigned(use) & 1u);
    turns.start();
    mbar_wait(c.full_k(pos.stage), pos.phase);
    kv0 = ld_shared_s32(c.info(pos.stage));
  }
  if (kv0 >= 0) {
    bool full = ld_shared_s32(c.info(pos.stage) + 4) != 0;
    turns.take();
    issue_qk<T, D, BN>(s, q_half, c.k_tile(pos.stage));
    turns.give();
    RelTile<BN> rel;
    rel_tile_prepare<V, BN>(rel, rdw, p, b, h, qw, kv0, t);  // while S is computed
    wgmma_wait<0>();
    fence_operands(s);
    release(c.empty_k(pos.stage), lane);
    RingPos prev;  // the slot of the kv tile whose S (then P) the softmax last took (set in the loop)

    // After the softmax of a tile: the wait for the P V in flight (the softmax kept above it: its results are used
    // only after it, and NVVM would otherwise be free to sink the exp2s below it, losing the overlap), then O's
    // rescale and P rounded for the next P V. has_v: that P V exists (not in the first iteration).
    const auto fold_step = [&](bool has_v, int v_stage) {
      fence_operands(s);
      fence_operands(l);
      fence_operands(alpha);
      wgmma_wait<0>();
      fence_operands(o);
      fence_operands(pa);
      if (has_v) release(c.empty_v(v_stage), lane);
      rescale_o<Dv>(o, alpha);
      pack_p<T, BN>(pa, s);
    };
    // The kv loop, rotated: an iteration starts with the softmax of the tile whose S arrived and ends with the next
    // tile's Q K^T and this tile's P V in flight (S_j and P_{j-1} V_{j-1} together, then a wait for S_j only), so the
    // mods and the softmax have one call site. Until session 29 the first tile was peeled instead (two call sites:
    // locally, ptxas 13.0, sm_90a, D = 128, the rotated loop takes NVVM + ptxas 15-20 % off the forward's cold compile
    // and a quarter of its SASS). The first iteration's wgmma_wait<0> and O rescale have nothing to wait for or scale
    // (O = 0). wgmma issues and waits stay unconditional in the loop body (the issues below the exit tests): a wgmma
    // issued or waited under a run-time condition makes ptxas serialize every wgmma (C7514).
    int v_read = -1;  // the V stage of the P V that this iteration's wgmma_wait<0> retires; -1: none yet
#pragma unroll
    for (int i = 0; i < BN / 4; ++i) pa[i] = 0u;  // the first iteration's fence reads P before any was packed
    for (int j = 1;; ++j) {
      scores_softmax<V, BN>(s, p, b, h, qw, kv0, full, t, m, l, alpha, mr, slope, sc, rel);
      fold_step(v_read >= 0, v_read);
      prev = pos;
      pos.template advance<C::ST>();
      if constexpr (kPersistent) {
        if (j >= n) break;
      }
      mbar_wait(c.full_k(pos.stage), pos.phase);
      kv0 = ld_shared_s32(c.info(pos.stage));
      if constexpr (!kPersistent) {
        if (kv0 < 0) break;
      }
      full = ld_shared_s32(c.info(pos.stage) + 4) != 0;
      turns.take();
      issue_qk<T, D, BN>(s, q_half, c.k_tile(pos.stage));
      mbar_wait(c.full_v(prev.stage), prev.phase);
      issue_pv<T, Dv, BN>(o, pa, c.v_tile(prev.stage));
      turns.give();
      rel_tile_prepare<V, BN>(rel, rdw, p, b, h, qw, kv0, t);
      wgmma_wait<1>();  // S_j is ready; P_{j-1} V_{j-1} may still run
      fence_operands(s);
      release(c.empty_k(pos.stage), lane);
      v_read = prev.stage;
    }

    // Drain: the last P V.
    mbar_wait(c.full_v(prev.stage), prev.phase);
    turns.take();
    issue_pv<T, Dv, BN>(o, pa, c.v_tile(prev.stage));
    turns.give();
    wgmma_wait<0>();
    fence_operands(o);
    fence_operands(pa);
    release(c.empty_v(prev.stage), lane);
  }
  if constexpr (!kPersistent) {
    // The end marker's slot (its info was read above): no V bytes, released like a data slot.
    mbar_wait(c.full_v(pos.stage), pos.phase);
    release(c.empty_k(pos.stage), lane);
    release(c.empty_v(pos.stage), lane);
    pos.template advance<C::ST>();
    turns.finish();
  }
  constexpr bool kFreshTid = C::kTall && use_rel_affine<V>();  // fwd_epilogue_sm90.cuh
  // The O tile is staged in this warpgroup's half of the tile's own Q buffer: its last Q K^T retired.
  // The row max in log2 units (the softmax kept it in u units, fwd_softmax_sm90.cuh); c > 0 keeps -inf.
  if constexpr (use_softcap<V>()) {  // m and the reference max are in log2 units already
    fwd_epilogue<T, Dv, kFreshTid>(p, o, m, l, q_half, c.q_free(qb), wg, C::bar_epilogue(wg), tid, q0, b, h, mr);
    return;
  }
  const float c_log2 = softmax_log2_factor<V>(p);
  m[0] *= c_log2;
  m[1] *= c_log2;
#if defined(FLEXATTN_SM90_LAZY_RESCALE)
  mr[0] *= c_log2;
  mr[1] *= c_log2;
  fwd_epilogue<T, Dv, kFreshTid>(p, o, m, l, q_half, c.q_free(qb), wg, C::bar_epilogue(wg), tid, q0, b, h, mr);
#else
  fwd_epilogue<T, Dv, kFreshTid>(p, o, m, l, q_half, c.q_free(qb), wg, C::bar_epilogue(wg), tid, q0, b, h, m);
#endif
}

template <class V, class T, class C, bool kPingPong>
__device__ __forceinline__ void fwd_consumer(const AttnParams& p, const C& c, int wg, const FwdTileOrder& order) {
  RingPos pos{0, 0u};
  int it = 0;
  if constexpr (C::kPersistent) {
    // The tiles come from the producer ({n, t} with each Q use, handshake 1): no order of our own.
    const Turns<kPingPong, C::WG> turns{wg};
    turns.start();
    for (;; ++it) {
      const int qb = C::QB == 1 ? 0 : it & 1, use = C::QB == 1 ? it : it >> 1;
      mbar_wait(c.bar_q(qb), unsigned(use) & 1u);
      const int n = ld_shared_s32(c.kv_count(qb)), t = ld_shared_s32(c.kv_count(qb) + 4);
      if (t < 0) break;  // the end marker
      fwd_consume_tile<V, T, C, kPingPong>(p, c, wg, order.template at<C::BM>(t), it, pos, n);
    }
    turns.finish();
  } else {
    for (int t = blockIdx.x; t < order.count; t += gridDim.x, ++it)
      fwd_consume_tile<V, T, C, kPingPong>(p, c, wg, fwd_tile_at<C::BM>(order, p, t), it, pos);
  }
}

}  // namespace flexattn::kern::sm90
