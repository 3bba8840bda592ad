#pragma once
// Producer of the sm90 backward: warp 0 of warpgroup 0. Lane 0 issues every TMA load: K and V of the
// CTA's kv tile once, then Q and dO of each query tile that attends it, in the sm80 backward's order
// (BwdTileIter: batch, query head of the group, transposed lists merged in ascending block order). All 32 lanes copy
// the tile's lse (converted to log2 units, +inf for a fully masked row and past L) and delta into the
// stage, so the consumers never touch global memory for them; each lane's own arrival on the stage's
// full barrier releases its stores. The tile's start, head, batch and kind go into the stage's info
// slot; after the last tile a start of -1 ends the consumers' loop.
#include "common/mask_iter.cuh"
#include "common/params.h"
#include "sm80/attn_bwd_sm80.cuh"
#include "sm80/scores_sm80.cuh"
#include "sm90/bwd_dq_claim_sm90.cuh"
#include "sm90/bwd_dq_order_sm90.cuh"
#include "sm90/bwd_dq_rank_sm90.cuh"
#include "sm90/bwd_layout_sm90.cuh"
#include "sm90/fwd_scheduler_sm90.cuh"
#include "sm90/ptx/redux.cuh"
#include "sm90/ptx/bulk_reduce.cuh"
#include "sm90/ptx/mbarrier.cuh"
#include "sm90/ptx/smem.cuh"
#include "sm90/ptx/tma.cuh"

namespace flexattn::kern::sm90 {

// One query tile into ring stage `stage` (its empty barrier passed): lane 0 announces the stage's TMA bytes and
// issues the Q and dO loads first, so they run while all 32 lanes fetch the tile's lse (converted to log2 units,
// +inf past L) and delta from global memory into the stage; lane 0 writes the info slot; every lane's arrival
// on the full barrier releases its own stores. (With the loads issued after the lse / delta round trip, as
// before, a short tile could find its next stage not yet loaded: the D=128 document backward's consumers
// waited on full for 3.5 % of the stall samples, H200 profile of session 12.)
template <int D, int Dv, class C>
__device__ __forceinline__ void bwd_fill_stage(const AttnParams& p, const C& c, int stage, const QTileRef& t, int lane) {
  if (lane == 0) {
    mbar_expect_tx(c.full(stage), C::kQdoBytes);
#pragma unroll
    for (int s = 0; s < D / 64; ++s)
      tma_load_4d(c.q_tile(stage) + s * C::kSlabBytes, &p.q_map, c.full(stage), 64 * s, t.q0, t.h, t.b);
#pragma unroll
    for (int s = 0; s < Dv / 64; ++s)
      tma_load_4d(c.do_tile(stage) + s * C::kSlabBytes, &p.o_map, c.full(stage), 64 * s, t.q0, t.h, t.b);
    st_shared_s32(c.info(stage), t.q0);
    st_shared_s32(c.info(stage) + 4, t.h);
    st_shared_s32(c.info(stage) + 8, t.b);
    st_shared_s32(c.info(stage) + 12, t.full ? 1 : 0);
  }
  const long long row0 = ((long long)t.b * p.Hq + t.h) * p.L + t.q0;
#pragma unroll
  for (int r = lane; r < C::BM; r += 32) {
    const bool in = t.q0 + r < p.L;
    st_shared_f32(c.lse(stage) + 4 * r, in ? lse_to_log2(p.lse[row0 + r]) : pos_inf());
    st_shared_f32(c.delta(stage) + 4 * r, in ? p.delta[row0 + r] : 0.f);
  }
  mbar_arrive(c.full(stage));
}

template <int D, int Dv, bool kB = false, bool kV2 = false, bool kT = false>
__device__ __forceinline__ void bwd_producer(const AttnParams& p, const BwdCfg<D, Dv, kB, kV2, kT>& c, int kv0, int hk,
                                             int bz, int lane) {
  using C = BwdCfg<D, Dv, kB, kV2, kT>;
  const int bk = p.Bkv == 1 ? 0 : bz;
  if (lane == 0) {
    tma_prefetch_map(&p.q_map);
    tma_prefetch_map(&p.k_map);
    tma_prefetch_map(&p.v_map);
    tma_prefetch_map(&p.o_map);
    // Rows past S come back as zeros (TMA bounds); the full box bytes are still credited.
    mbar_arrive_expect_tx(c.bar_kv(), C::kKvBytes);
#pragma unroll
    for (int w = 0; w < C::KVH; ++w) {
#pragma unroll
      for (int s = 0; s < D / 64; ++s)
        tma_load_4d(c.k_half(w) + s * C::kSlabBytes, &p.k_map, c.bar_kv(), 64 * s, kv0 + 64 * w, hk, bk);
#pragma unroll
      for (int s = 0; s < Dv / 64; ++s)
        tma_load_4d(c.v_half(w) + s * C::kSlabBytes, &p.v_map, c.bar_kv(), 64 * s, kv0 + 64 * w, hk, bk);
    }
  }

  BwdTileIter it;
  it.init(p, bz, hk, kv0, C::BM);
  RingPos pos{0, 0u};
  while (it.next(p)) {
    mbar_wait(c.empty(pos.stage), pos.phase ^ 1u);
    bwd_fill_stage<D, Dv>(p, c, pos.stage, it.cur, lane);
    pos.template advance<C::ST>();
  }
  mbar_wait(c.empty(pos.stage), pos.phase ^ 1u);
  if (lane == 0) st_shared_s32(c.info(pos.stage), -1);
  mbar_arrive(c.full(pos.stage));
}

// Producer of the persistent backward (kPersistent, FLEXATTN_SM90_BWD_PERSISTENT; docs/kernels_sm90.md,
// "Persistent backward"): the same warp and lanes, looping over work tiles t (sm90_bwd_work_tile order, in groups
// of p.bwd_head_group pairs; the first is blockIdx.x, every further one from the tile queue p.tile_queue, or
// t + gridDim.x without one: fwd_queue_next, the forward's queue word protocol). Per work tile:
//   1. wait kv_empty (every consumer warp is done with the previous tile's K / V and info slot), write
//      the tile into kv_info, load K and V on bar_kv (its phase flips once per tile);
//   2. the query tiles exactly as bwd_producer, through the same ring, whose (stage, phase) runs on across
//      work tiles;
//   3. claim the next tile (after the walk, so the claims stay in greedy order) and prefetch its K / V
//      into L2, so step 1 of the next tile reads them from L2 while the consumers run this tile's epilogue;
//   4. a ring slot with start -1 ends this tile's query tiles (the consumers release it like any other).
// After the last tile, kv_info gets -1 and bar_kv a plain arrival: the consumers leave their tile loop.
template <int D, int Dv, bool kB = false, bool kV2 = false, bool kT = false>
__device__ __forceinline__ void bwd_producer_persistent(const AttnParams& p, const BwdCfg<D, Dv, kB, kV2, kT>& c,
                                                        int lane) {
  using C = BwdCfg<D, Dv, kB, kV2, kT>;
  if (lane == 0) {
    tma_prefetch_map(&p.q_map);
    tma_prefetch_map(&p.k_map);
    tma_prefetch_map(&p.v_map);
    tma_prefetch_map(&p.o_map);
  }
  const int count = sm90_bwd_work_tiles(p.Bkv, p.Hkv, p.S), n_kv = (p.S + kSm90BwdBlockN - 1) / kSm90BwdBlockN;
  int t = blockIdx.x;
  RingPos pos{0, 0u};
  unsigned kv_phase = 0u;
  while (true) {
    mbar_wait(bwd_kv_empty(c), kv_phase ^ 1u);
    kv_phase ^= 1u;
    if (t >= count) {
      if (lane == 0) {
        st_shared_s32(bwd_kv_info(c), -1);
        mbar_arrive(c.bar_kv());
      }
      break;
    }
    const Sm90BwdWorkTile w = sm90_bwd_work_tile(t, n_kv, p.Hkv, p.Bkv, p.bwd_head_group);
    if (lane == 0) {
      const int bk = p.Bkv == 1 ? 0 : w.bz;
      st_shared_s32(bwd_kv_info(c), w.kv0);
      st_shared_s32(bwd_kv_info(c) + 4, w.hk);
      st_shared_s32(bwd_kv_info(c) + 8, w.bz);
      st_shared_s32(bwd_kv_info(c) + 12, int(kv_phase));  // the parity of bar_kv's next phase
      mbar_arrive_expect_tx(c.bar_kv(), C::kKvBytes);
#pragma unroll
      for (int h = 0; h < C::KVH; ++h) {
#pragma unroll
        for (int s = 0; s < D / 64; ++s)
          tma_load_4d(c.k_half(h) + s * C::kSlabBytes, &p.k_map, c.bar_kv(), 64 * s, w.kv0 + 64 * h, w.hk, bk);
#pragma unroll
        for (int s = 0; s < Dv / 64; ++s)
          tma_load_4d(c.v_half(h) + s * C::kSlabBytes, &p.v_map, c.bar_kv(), 64 * s, w.kv0 + 64 * h, w.hk, bk);
      }
    }

    BwdTileIter it;
    it.init(p, w.bz, w.hk, w.kv0, C::BM);
    while (it.next(p)) {
      mbar_wait(c.empty(pos.stage), pos.phase ^ 1u);
      bwd_fill_stage<D, Dv>(p, c, pos.stage, it.cur, lane);
      pos.template advance<C::ST>();
    }

    // Lane 0 alone takes from the queue (one atomic per take: the word's count protocol); redux.sync
    // hands the result to the warp as a uniform value (fwd_uniform's reason: the walk stays on the
    // uniform datapath).
    int next = 0;
    if (lane == 0) next = fwd_queue_next(p.tile_queue, t, count);
    t = int(redux_or(unsigned(next), 0xffffffffu));
    if (lane == 0 && t < count) {
      const Sm90BwdWorkTile n = sm90_bwd_work_tile(t, n_kv, p.Hkv, p.Bkv, p.bwd_head_group);
      const int bk = p.Bkv == 1 ? 0 : n.bz;
#pragma unroll
      for (int h = 0; h < C::KVH; ++h) {
#pragma unroll
        for (int s = 0; s < D / 64; ++s) tma_prefetch_l2_4d(&p.k_map, 64 * s, n.kv0 + 64 * h, n.hk, bk);
#pragma unroll
        for (int s = 0; s < Dv / 64; ++s) tma_prefetch_l2_4d(&p.v_map, 64 * s, n.kv0 + 64 * h, n.hk, bk);
      }
    }
    mbar_wait(c.empty(pos.stage), pos.phase ^ 1u);
    if (lane == 0) st_shared_s32(c.info(pos.stage), -1);
    mbar_arrive(c.full(pos.stage));
    pos.template advance<C::ST>();
  }
}

// dQ writer of the bulk dQ path (kDqBulk, FLEXATTN_SM90_BWD_DQ_BULK): warp 1 of warpgroup 0 (and warp 2 in
// deterministic mode, below), all 32
// lanes walking (the role branch is warp-uniform, see attn_bwd_sm90.cuh), lane 0 issuing. Per query
// tile, in the consumers' order, it waits for dQ buffer j to hold the sum of both consumer warpgroups'
// partials (dq_full), reads the tile's info slot, and adds rows < L into dq_accum with one
// cp.reduce.async.bulk ... add.f32 per row (the shared rows are padded, the global rows contiguous),
// commits them as one bulk group, waits until the group has finished reading shared memory
// (wait_group.read) and hands the buffer back (dq_empty). An info start of -1 ends the loop; the last
// wait lets every reduction finish before the CTA exits.
// The same loop serves the backward v2 (kV2): one buffer (DQB = 1: the phase flips every tile), filled
// by both consumer warpgroups (64 columns each).
// v3 (kT, FLEXATTN_SM90_BWD_V3): the buffer is D / 32 swizzled [64][32] fp32 slabs and lane 0 adds each
// with one TMA tensor reduction (p.dq_map, 3-D (D, L, B * Hq)); rows >= L lie outside the map and are
// skipped by the TMA unit, so there is no per-row loop. With p.dq_claim the first writer of a tile stores it
// instead (bwd_dq_claim_sm90.cuh) and releases the tile once its stores have completed.
// Two writers (deterministic mode): warps 1 and 2 (w = 0, 1) take the even and the odd tiles. Each tile's writer chain
// (rank, acquire, reductions, read, completion, release) is serial and longer than a consumer step (session 18:
// causal D=128 +52 % with one writer, +21 % with two); alternating, a warp's chain may take two steps. With two dQ
// buffers (the first kernel; v2 with the TMA reductions) tile t uses buffer t mod 2, so each warp owns one buffer and
// its barriers. With one (v2 with the per-row tiles, FLEXATTN_SM90_BWD_V3=0) a writer first waits for the previous
// tile's dq_empty (the other warp's): dq_full is then in the phase of its own tile or past it, so the parity wait
// cannot mistake a phase two ahead for its own, and the warp that reads the first end marker hands the buffer back
// for the second. The consumers post the end marker once per writer.
template <int D, int Dv, bool kB, bool kV2, bool kT = false, bool kP = false>
__device__ __forceinline__ void bwd_dq_writer(const AttnParams& p, const BwdCfg<D, Dv, kB, kV2, kT>& c, int lane,
                                              int kv_tile, int w) {
  using C = BwdCfg<D, Dv, kB, kV2, kT>;
  if (!bwd_adds_dq<kB, kP>(p)) return;  // the consumers skip dQ the same way
  // Deterministic mode: each tile's reductions wait for their turn and complete before the next kv tile's
  // (bwd_dq_order_sm90.h).
  // (Never for the wide kernel: the runtime orders only 128-row kv tiles, sm90_bwd_orders_dq; compiled out there.)
  const bool ordered = !C::kWide && bwd_dq_ordered<kB, kP>(p);
  static_assert(C::DQB <= 2, "two writers: a buffer per writer, or one shared");
  const int writers = bwd_dq_writer_count(ordered);
  if (w >= writers) return;
  if constexpr (kT) {
    if (lane == 0) tma_prefetch_map(&p.dq_map);
  }
  RingPos pos{0, 0u};
  if (w == 1) pos.template advance<C::DQB>();  // its first tile is tile 1
  DqRankCache rank_cache;
  // With two dQ buffers (the first kernel; v2 with the TMA reductions) the writer polls its next tile's turn before that
  // tile's dq_full (bwd_dq_early_turn). v2 lost with it while it had one buffer (session 19: causal D = 128 +21 ->
  // +53 %); with two, its rank warm-up (the cache's second entry) spilled 16 bytes, the early turn none.
  constexpr bool kEarly = kT && C::DQB == 2;
  int next_q0 = -1, next_bh = 0;  // the tile this warp expects next; -1: none
  // With the rank warp (bwd_dq_rank_sm90.cuh; compiled in, kRing) the next tile and its rank come from the ring, one
  // entry per dq_full, and the rank cache is dead code (the writers' 24 registers hold the ring position instead).
  constexpr bool kRing = bwd_dq_rank_ring_on<C>();
  static_assert(!kRing || kEarly, "the rank ring serves the early turn's writers");
  const bool ring = bwd_dq_rank_warp_runs<C, kB, kP>(p);  // the rank warp's own predicate (here: ordered)
  RingPos rpos{0, 0u};
  if (w == 1) rpos.template advance<C::RS>();
  int next_rank = 0;
  while (true) {
    if (C::DQB == 1 && writers == 2) mbar_wait(c.dq_empty(0), pos.phase ^ 1u);  // the previous tile read (at once for tile 0)
    bool early = false;
    if constexpr (kRing) {
      if (ring) {
        const DqRankEntry e = bwd_dq_next_rank(c, rpos, lane);
        next_q0 = e.q0, next_bh = e.bh, next_rank = e.rank;
        if (next_q0 >= 0) early = bwd_dq_early_rank(p, c.dq_full(pos.stage), pos.phase, next_bh, next_q0, next_rank, lane);
      }
    } else if constexpr (kEarly) {
      if (ordered && next_q0 >= 0)
        early = bwd_dq_early_turn(p, c.dq_full(pos.stage), pos.phase, next_bh, next_q0, kv_tile, lane, rank_cache);
    }
    mbar_wait(c.dq_full(pos.stage), pos.phase);
    const int q0 = ld_shared_s32(c.dq_info(pos.stage));
    if (q0 < 0) {
      // The other writer's end marker may follow; every lane has seen this one first (a lane still waiting on
      // dq_full would otherwise see that marker's phase, of the same parity, and pass on it, or hang).
      __syncwarp();
      if (C::DQB == 1 && writers == 2 && lane == 0) mbar_arrive(c.dq_empty(0));
      break;
    }
    const int bh = ld_shared_s32(c.dq_info(pos.stage) + 4);
    const bool expected = q0 == next_q0 && bh == next_bh;
    if (ordered && !(early && expected)) {
      if constexpr (kRing)  // the ring follows the consumers' walk, so `expected` holds; else the order is abandoned
        bwd_dq_wait_ring_rank(p, bh, q0, expected, next_rank, lane);
      else
        bwd_dq_wait_turn(p, bh, q0, kv_tile, lane, rank_cache);
    }
    if (lane == 0) {
      bool first = false;  // this writer claimed the tile and stores it (bwd_dq_claim_sm90.cuh)
      if constexpr (kT) {
        first = p.dq_claim != nullptr && bwd_dq_claim(p, bh, q0);
        // The branch outside the slab loops: inside, ptxas ran a predicated-off store loop (ELECT, R2UR.OR) between
        // consecutive reductions, ~95 more instructions per tile on the deterministic writer's serial chain at D = 128
        // (session 31's SASS diff; the ordered causal backward +6-10 % since session 30).
        if (first) {
#pragma unroll
          for (int s = 0; s < D / 32; ++s) tma_store_3d(&p.dq_map, c.dq_buf(pos.stage) + s * 64 * 128, 32 * s, q0, bh);
        } else {
#pragma unroll
          for (int s = 0; s < D / 32; ++s)
            tma_reduce_add_3d(&p.dq_map, c.dq_buf(pos.stage) + s * 64 * 128, 32 * s, q0, bh);
        }
      } else {
        const int rows = p.L - q0 < C::BM ? p.L - q0 : C::BM;
        float* dst = p.dq_accum + ((long long)bh * p.L + q0) * D;
        const unsigned src = c.dq_buf(pos.stage);
        for (int r = 0; r < rows; ++r) bulk_reduce_add_f32(dst + r * D, src + r * C::kSmem.dq_row, 4 * D);
      }
      bulk_commit_group();
      bulk_wait_group_read<0>();
      mbar_arrive(c.dq_empty(pos.stage));
      if (first) bwd_dq_mark_stored(p, bh, q0);
      if (ordered) bwd_dq_pass_turn(p, bh, q0);
    }
    __syncwarp();
    // This warp's next tile (the walk going on: q0 + 64 per writer) for the early turn, or its rank while the consumers
    // compute it (bwd_dq_warm_rank). Not on the per-row bulk paths (opt-outs: FLEXATTN_SM90_BWD_V3=0, or V2=0 at
    // D = 128): with the row loop the second cache entry spilled 8-88 bytes there (nvcc 13.0).
    if constexpr (kRing) {
    } else if constexpr (kEarly) {
      next_q0 = q0 + writers * C::BM < p.L ? q0 + writers * C::BM : -1;
      next_bh = bh;
    } else if constexpr (kT) {
      if (ordered) bwd_dq_warm_rank(p, bh, q0 + writers * C::BM, kv_tile, lane, rank_cache);
    }
    pos.template advance<C::DQB>();
    if (writers == 2) pos.template advance<C::DQB>();  // past the other writer's tile
  }
  if (lane == 0) bulk_wait_group<0>();
}

}  // namespace flexattn::kern::sm90
