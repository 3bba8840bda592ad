#pragma once
// The rank warp of the ordered dQ reductions (deterministic mode; bwd_dq_order_sm90.h has the order): warp 3 of
// warpgroup 0 reads the CTA's query tiles from the producer's stage ring and puts each tile's (start, b * Hq + h,
// rank) into a ring of kSm90BwdRankSlots shared slots (full / empty barriers per slot). The two dQ writers take slot
// t % RS for their tile t (writer t % 2) before that tile's dq_full, so they know the tile and its rank ahead and
// poll its turn while the consumers compute it (bwd_dq_early_rank).
// Why: session 33's ncu of the causal D=128 backward (H100, S=8192) had the writers busy ~80 % of the time, 48 % of
// their samples in the rank (the mask row's divisions and the list reads: two dependent global loads per tile, as the
// two writers alternate query tiles and so never share a mask row in their caches), and the consumers waiting on
// dq_empty for 3.9 % of all samples (0.1 % by default). Here the rank leaves the writers' serial chain, consecutive
// tiles of one mask row share it, and the early turn covers every tile (it guessed q0 + 128 before).
// After the walk the warp writes two end entries (start -1), one per writer: each writer reads exactly one entry per
// dq_full it waits for, the consumers' end markers included.
#include "common/params.h"
#include "sm90/bwd_dq_order_sm90.cuh"
#include "sm90/bwd_layout_sm90.cuh"
#include "sm90/ptx/mbarrier.cuh"
#include "sm90/ptx/smem.cuh"

namespace flexattn::kern::sm90 {

// Whether the kernel runs the rank warp and its writers read the ring: the ordered mode's TMA dQ path with two buffers
// (C::kRankRing), unless compiled out (FLEXATTN_SM90_BWD_RANK_WARP=0 puts FLEXATTN_SM90_BWD_NO_RANK_WARP in the
// source: the writers then compute the ranks, as before session 33).
template <class C>
__device__ __forceinline__ constexpr bool bwd_dq_rank_ring_on() {
#if defined(FLEXATTN_SM90_BWD_NO_RANK_WARP)
  return false;
#else
  return C::kRankRing;
#endif
}

// Whether this launch runs the rank warp (and its writers read the ring): compiled in, and the writers ordered. The
// one predicate of the barrier counts, the warp's role and the writers' reads.
template <class C, bool kB, bool kP>
__device__ __forceinline__ bool bwd_dq_rank_warp_runs(const AttnParams& p) {
  if constexpr (kB && bwd_dq_rank_ring_on<C>()) return bwd_adds_dq<kB, kP>(p) && bwd_dq_ordered<kB, kP>(p);
  return false;
}

struct DqRankEntry {
  int q0, bh, rank;  // q0 < 0: no more tiles
};

// Warp 3 of warpgroup 0, all lanes (the rank sums over them), when the writers are ordered. It follows the producer's
// stage ring: waits for each stage's full barrier, reads the tile from its info slot and arrives on the stage's empty
// barrier (one arrival more than the consumer warps', bwd_dq_stage_empty_arrivals), so the producer cannot refill a
// stage it has not read. (Its own walk, BwdTileIter as the producer's, spilled its 24 registers: ptxas 13.0, 182
// bytes.) The info is read before the rank is computed, and the stage released before the ring slot is waited for,
// so the warp never holds the producer for longer than a rank.
template <class C>
__device__ __forceinline__ void bwd_dq_rank_warp(const AttnParams& p, const C& c, int kv_tile, int lane) {
  RingPos st{0, 0u}, pos{0, 0u};
  int row = -3, rank = 0;
  for (int ends = 0; ends < 2; pos.template advance<C::RS>()) {
    int q0 = -1, bh = 0;
    if (ends == 0) {
      mbar_wait(c.full(st.stage), st.phase);
      q0 = ld_shared_s32(c.info(st.stage));
      const int h = ld_shared_s32(c.info(st.stage) + 4), b = ld_shared_s32(c.info(st.stage) + 8);
      if (q0 >= 0) {
        __syncwarp();
        if (lane == 0) mbar_arrive(c.empty(st.stage));
        st.template advance<C::ST>();
        bh = b * p.Hq + h;
        const int r = bwd_dq_mask_row(p, b, h, q0);
        if (r != row) {  // consecutive tiles of one mask row share its rank
          rank = bwd_dq_rank_of_row(p, r, kv_tile, lane);
          row = r;
        }
      }
    }
    if (q0 < 0) ++ends;
    mbar_wait(c.rank_empty(pos.stage), pos.phase ^ 1u);
    if (lane == 0) {
      st_shared_s32(c.rank_slot(pos.stage), q0);
      st_shared_s32(c.rank_slot(pos.stage) + 4, bh);
      st_shared_s32(c.rank_slot(pos.stage) + 8, rank);
      mbar_arrive(c.rank_full(pos.stage));
    }
    __syncwarp();
  }
}

// Arrivals on a stage's empty barrier: one per consumer warp, and the rank warp's when it runs (`rank_warp`).
__device__ __forceinline__ constexpr unsigned bwd_dq_stage_empty_arrivals(bool rank_warp) {
  return kEmptyArrivals + (rank_warp ? 1u : 0u);
}

// A writer's next entry (whole warp): waits for slot `pos`, reads it, hands the slot back and moves `pos` past the
// other writer's slot. After the warp's end entry (the last the rank warp writes for it) `pos.stage` is -1 and every
// later call returns an end entry at once: a writer that still met a tile (never expected) abandons the order for it
// instead of waiting for a slot nobody fills.
template <class C>
__device__ __forceinline__ DqRankEntry bwd_dq_next_rank(const C& c, RingPos& pos, int lane) {
  if (pos.stage < 0) return DqRankEntry{-1, 0, 0};
  mbar_wait(c.rank_full(pos.stage), pos.phase);
  const DqRankEntry e{ld_shared_s32(c.rank_slot(pos.stage)), ld_shared_s32(c.rank_slot(pos.stage) + 4),
                      ld_shared_s32(c.rank_slot(pos.stage) + 8)};
  __syncwarp();
  if (lane == 0) mbar_arrive(c.rank_empty(pos.stage));
  pos.template advance<C::RS>();
  pos.template advance<C::RS>();
  if (e.q0 < 0) pos.stage = -1;
  return e;
}

// Whole warp, after dq_full when the early turn did not come: waits for the ring's rank when the tile is the ring's
// (`expected`; always, the ring and the consumers follow one walk), else gives up the order for the launch (the abandon
// word, as a timed-out wait does; reported under FLEXATTN_JIT_DEBUG=1) rather than keep a rank computation in the
// writers' 24 registers (it spilled them).
__device__ __forceinline__ void bwd_dq_wait_ring_rank(const AttnParams& p, int bh, int q0, bool expected, int rank,
                                                      int lane) {
  if (!expected) {
    if (lane == 0) st_relaxed_gpu_s32(p.dq_sem + bwd_dq_semaphores(p.B, p.Hq, p.L) - 1, 1);
    __syncwarp();
    return;
  }
  bwd_dq_wait_rank(p, bh, q0, rank, lane);
}

}  // namespace flexattn::kern::sm90
