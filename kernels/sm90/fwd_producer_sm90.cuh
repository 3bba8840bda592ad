#pragma once
// Producer of the sm90 forward: one thread (warp 0, lane 0 of warpgroup 0) issues every TMA load, for
// every tile the CTA owns (fwd_scheduler_sm90.cuh). Per tile: K and V of the first kv tile (they may
// land while the consumers still store the previous tile), then Q once the consumers have freed the Q
// halves (q_free), then K and V of the remaining kv tiles in block-mask order (partial tiles, then full
// ones: common/mask_iter.cuh) through a `stages`-deep ring that runs on across tiles. Before each K it
// publishes the tile start and kind in the stage's info slot, so the consumers never walk the lists
// themselves. After the last kv tile an end marker (-1) takes one ring slot: a plain arrive on both its
// K and V barriers (no bytes), so every slot always completes a whole K-and-V cycle and the phases of
// the ring stay in step for the next tile.
// The persistent kernel (kPersistent) takes its tiles from the tile queue, publishes each tile's index
// and kv-tile count with its Q instead of the end marker, loads Q into alternating buffers and ends with
// an end-marker Q use (fwd_scheduler_sm90.cuh, "Handshake").
#include "common/mask_iter.cuh"
#include "common/params.h"
#include "sm90/fwd_layout_sm90.cuh"
#include "sm90/fwd_scheduler_sm90.cuh"
#include "sm90/ptx/mbarrier.cuh"
#include "sm90/ptx/smem.cuh"
#include "sm90/ptx/tma.cuh"

namespace flexattn::kern::sm90 {

// FLEXATTN_SM90_EARLY_CLAIM = k (1..4; the source generator's define): the persistent producer claims its next
// tile from the queue before issuing the k-th last K/V of the current one instead of after the last. The claim
// starts the chain that the next tile's first loads wait for (the queue's atomic, the row order's lookup, the
// block counts and lists); the ring's lead (`stages` kv tiles) is all that hides it, and a sliding window's
// 9-tile walk measured that chain as exposed: one more dependent load in it (FLEXATTN_SM90_ROW_ORDER's) cost
// 2-3 % (session 24). Claims k kv tiles early still come in the order of the tiles' ends, as the greedy queue's do
// (schedule model: causal makespan unchanged at k = 1, 2; test_sm90_host.cc EarlyClaimKeepsTheGreedyMakespan). An A/B
// knob until measured.
#if defined(FLEXATTN_SM90_EARLY_CLAIM)
constexpr int kEarlyClaim = FLEXATTN_SM90_EARLY_CLAIM;
#else
constexpr int kEarlyClaim = 0;
#endif
static_assert(kEarlyClaim >= 0 && kEarlyClaim <= 4, "FLEXATTN_SM90_EARLY_CLAIM: 0..4 kv tiles");

// C: the kernel's FwdCfg (fwd_layout_sm90.cuh), in every function of this file.
template <class C>
__device__ __forceinline__ void produce_kv(const AttnParams& p, const C& c, RingPos& pos, int kv0, bool full, int hk,
                                           int bk) {
  constexpr int D = C::D, Dv = C::Dv;
  mbar_wait(c.empty_k(pos.stage), pos.phase ^ 1u);
  st_shared_s32(c.info(pos.stage), kv0);
  st_shared_s32(c.info(pos.stage) + 4, full ? 1 : 0);
  mbar_arrive_expect_tx(c.full_k(pos.stage), C::kKBytes);  // release: the info slot is visible
#pragma unroll
  for (int s = 0; s < D / 64; ++s)
    tma_load_4d(c.k_tile(pos.stage) + s * C::kKvSlabBytes, &p.k_map, c.full_k(pos.stage), 64 * s, kv0, hk, bk);
  mbar_wait(c.empty_v(pos.stage), pos.phase ^ 1u);
  mbar_arrive_expect_tx(c.full_v(pos.stage), C::kVBytes);
#pragma unroll
  for (int s = 0; s < Dv / 64; ++s)
    tma_load_4d(c.v_tile(pos.stage) + s * C::kKvSlabBytes, &p.v_map, c.full_v(pos.stage), 64 * s, kv0, hk, bk);
  pos.template advance<C::ST>();
}

// The persistent producer's claim of its next tile (kEarlyClaim): `next` once taken (-1 before), `left` the current
// tile's kv tiles still to issue. With kEarlyClaim = 0 nothing is taken here (the claim follows the walk) and this is
// produce_kv itself: the default kernel's SASS is the measured one (a forwarding lambda here had moved the
// producer's uniform registers, nvcc 13.0).
struct TileClaim {
  int next, left;
};
template <class C>
__device__ __forceinline__ void produce_kv_claiming(const AttnParams& p, const C& c, RingPos& pos, const TileWalker& walk,
                                                    int hk, int bk, TileClaim& claim, const FwdTileOrder& order, int t) {
  if constexpr (kEarlyClaim > 0) {
    if (claim.next < 0 && claim.left <= kEarlyClaim) claim.next = fwd_queue_next(p.tile_queue, t, order.count);
    --claim.left;
  }
  produce_kv(p, c, pos, walk.start, walk.full, hk, bk);
}

// One tile; `it` counts the CTA's tiles (the Q barriers' phase), `pos` is the ring position.
template <class C>
__device__ __forceinline__ void fwd_produce_tile(const AttnParams& p, const C& c, const FwdTile& tile, int it, RingPos& pos) {
  static_assert(!C::kPersistent, "the default kernel's producer");
  constexpr int D = C::D;
  const int q0 = tile.q0, b = tile.b, h = tile.h;
  const int hk = h / (p.Hq / p.Hkv), bk = p.Bkv == 1 ? 0 : b;
  TileWalker walk;
  init_kv_walker(walk, p, b, h, q0, C::BN);
  const bool first = walk.next();
  if (first) produce_kv(p, c, pos, walk.start, walk.full, hk, bk);

  // Rows past L come back as zeros (TMA bounds), and the full box bytes are still credited.
  if (it > 0) mbar_wait(c.q_free(), unsigned(it - 1) & 1u);
  mbar_arrive_expect_tx(c.bar_q(), C::kQBytes);
#pragma unroll
  for (int w = 0; w < C::WG; ++w) {
#pragma unroll
    for (int s = 0; s < D / 64; ++s)
      tma_load_4d(c.q_half(w) + s * C::kQSlabBytes, &p.q_map, c.bar_q(), 64 * s, q0 + 64 * w, h, b);
  }

  if (first)
    while (walk.next()) produce_kv(p, c, pos, walk.start, walk.full, hk, bk);
  mbar_wait(c.empty_k(pos.stage), pos.phase ^ 1u);
  st_shared_s32(c.info(pos.stage), -1);
  mbar_arrive(c.full_k(pos.stage));
  mbar_wait(c.empty_v(pos.stage), pos.phase ^ 1u);
  mbar_arrive(c.full_v(pos.stage));
  pos.template advance<C::ST>();
}

// One tile of the persistent kernel: Q with the tile's {kv-tile count, tile index} into buffer it % QB,
// then its kv tiles; no end marker. The order of the Q load and the first K/V follows handshake 3 of
// fwd_scheduler_sm90.cuh. Returns the CTA's next tile index, taken once the tile's last K/V is issued.
template <class C>
__device__ __forceinline__ int fwd_produce_tile_persistent(const AttnParams& p, const C& c, const FwdTileOrder& order, int t,
                                                           int it, RingPos& pos) {
  static_assert(C::kPersistent, "the persistent kernel's producer");
  constexpr int D = C::D;
  const int to = fwd_ordered_index<C::BM>(order, p, t);  // published for the consumers: they call at(to)
  const FwdTile tile = order.template at<C::BM>(to);
  const int q0 = tile.q0, b = tile.b, h = tile.h;
  const int hk = h / (p.Hq / p.Hkv), bk = p.Bkv == 1 ? 0 : b;
  const int qb = C::QB == 1 ? 0 : it & 1, use = C::QB == 1 ? it : it >> 1;
  TileWalker walk;
  init_kv_walker(walk, p, b, h, q0, C::BN);
  const int n = fwd_count_kv_tiles<C::BN>(walk.idx0, walk.cnt0, walk.idx1, walk.cnt1, walk.block, walk.len);

  // The slot is written only after q_free: the consumers of the buffer's previous use have read theirs.
  auto load_q = [&] {
    if (use > 0) mbar_wait(c.q_free(qb), unsigned(use - 1) & 1u);
    st_shared_s32(c.kv_count(qb), n);
    st_shared_s32(c.kv_count(qb) + 4, to);
    if (n == 0) {  // nothing to multiply: the arrival alone releases the slot (O = 0, lse = -inf)
      mbar_arrive(c.bar_q(qb));
      return;
    }
    // Rows past L come back as zeros (TMA bounds), and the full box bytes are still credited.
    mbar_arrive_expect_tx(c.bar_q(qb), C::kQBytes);
#pragma unroll
    for (int w = 0; w < C::WG; ++w) {
#pragma unroll
      for (int s = 0; s < D / 64; ++s)
        tma_load_4d(c.q_half(qb, w) + s * C::kQSlabBytes, &p.q_map, c.bar_q(qb), 64 * s, q0 + 64 * w, h, b);
    }
  };
  // The next tile is claimed once the tile's last K/V is issued (the greedy order: not when the tile starts; a claim
  // one tile ahead left causal 11 % over the queue's makespan in the schedule model of
  // tests/compile/sm90/test_sm90_host.cc), or with kEarlyClaim kv tiles still to issue (TileClaim).
  TileClaim claim{-1, n};
  if constexpr (C::QB == 2) {
    load_q();
    while (walk.next()) produce_kv_claiming(p, c, pos, walk, hk, bk, claim, order, t);
  } else {
    const bool first = walk.next();
    if (first) produce_kv_claiming(p, c, pos, walk, hk, bk, claim, order, t);
    load_q();
    if (first)
      while (walk.next()) produce_kv_claiming(p, c, pos, walk, hk, bk, claim, order, t);
  }
  return fwd_uniform(claim.next >= 0 ? claim.next : fwd_queue_next(p.tile_queue, t, order.count));
}

// The persistent producer's last use of a Q buffer: the end marker {0, -1}, a plain arrival (handshake 1, 2).
template <class C>
__device__ __forceinline__ void fwd_produce_end_persistent(const C& c, int it) {
  const int qb = C::QB == 1 ? 0 : it & 1, use = C::QB == 1 ? it : it >> 1;
  if (use > 0) mbar_wait(c.q_free(qb), unsigned(use - 1) & 1u);
  st_shared_s32(c.kv_count(qb), 0);
  st_shared_s32(c.kv_count(qb) + 4, -1);
  mbar_arrive(c.bar_q(qb));
}

template <class C>
__device__ __forceinline__ void fwd_producer(const AttnParams& p, const C& c, const FwdTileOrder& order) {
  tma_prefetch_map(&p.q_map);
  tma_prefetch_map(&p.k_map);
  tma_prefetch_map(&p.v_map);
  RingPos pos{0, 0u};
  int it = 0;
  if constexpr (C::kPersistent) {
    // Tiles from the queue (fwd_scheduler_sm90.cuh); the first one is blockIdx.x, with no atomic.
    for (int t = blockIdx.x; t < order.count; ++it) t = fwd_produce_tile_persistent(p, c, order, t, it, pos);
    fwd_produce_end_persistent(c, it);
  } else {
    for (int t = blockIdx.x; t < order.count; t += gridDim.x, ++it)
      fwd_produce_tile(p, c, fwd_tile_at<C::BM>(order, p, t), it, pos);
  }
}

}  // namespace flexattn::kern::sm90
