#pragma once
// Compile-time view of one sm90 backward specialization: addresses of every tile, barrier and info
// slot (offsets from tile_config_sm90_bwd.h added to the 1024-aligned base), and the barrier protocol.
#include "sm90/fwd_layout_sm90.cuh"
#include "sm90/tile_config_sm90_bwd.h"

namespace flexattn::kern::sm90 {

// kV2 (FLEXATTN_SM90_BWD_V2): the backward v2 consumers (bwd_consumer_v2_sm90.cuh) and its layout
// (dS^T tiles per stage); false is the layout and code that existed before the option.
// kDqTma (FLEXATTN_SM90_BWD_V3, only with kDqBulk; kV2 or not): the swizzled dQ tile(s) of the TMA
// reduce path.
template <int D, int Dv, bool kDqBulk = false, bool kV2 = false, bool kDqTma = false>
struct BwdCfg {
  static_assert(!kDqTma || kDqBulk, "the TMA dQ reduce is a variant of the bulk dQ path");
  static constexpr bool kTma = kDqTma;
  // The wide kernel (D = Dv = 256, tile_config_sm90_bwd.h "Wide head dims"): 64-row kv tile, one stage, one dQ
  // buffer; its only dQ path is the TMA reduce (kDqBulk and kDqTma).
  static constexpr bool kWide = sm90_bwd_wide(D, Dv);
  static_assert(!kWide || (kDqBulk && kDqTma && !kV2), "the wide kernel's dQ path is the TMA reduce (v3)");
  static constexpr Sm90BwdSmem kSmem = sm90_bwd_smem_layout(D, Dv, kDqBulk, kV2, kDqTma);
  static constexpr int BM = kSm90BwdBlockM, BN = sm90_bwd_block_n(D, Dv), ST = sm90_bwd_stages(D, Dv);
  static constexpr int KVH = BN / 64;  // 64-row kv halves (one TMA box each)
  static constexpr int kSlabBytes = 64 * 128;  // one [64 rows][64] slab (every box has 64 rows)
  static constexpr unsigned kKvBytes = BN * (D + Dv) * 2;  // expect_tx of the kv barrier
  static constexpr unsigned kQdoBytes = BM * (D + Dv) * 2;  // expect_tx of a stage's full barrier
  static_assert(sm90_bwd_head_dims_ok(D, Dv), "sm90 backward head dims: 64 or 128, or D = Dv = 256");
  static_assert(BM == 64, "one m64 / k64 query tile per stage (the dS^T tile is one 128-byte slab wide)");
  // Register split (setmaxnreg): the wide kernel takes the v2's 24 / 240 (its producer is the bulk path's).
  static constexpr int kProducerRegs = kWide ? 24 : sm90_bwd_producer_regs(kDqBulk, kV2);
  static constexpr int kConsumerRegs = kWide ? 240 : sm90_bwd_consumer_regs(kDqBulk, kV2);

  unsigned base;  // 1024-aligned shared address of the layout

  __device__ __forceinline__ unsigned k_half(int wg) const { return base + kSmem.k + wg * kSmem.k_half; }
  __device__ __forceinline__ unsigned v_half(int wg) const { return base + kSmem.v + wg * kSmem.v_half; }
  __device__ __forceinline__ unsigned q_tile(int s) const { return base + kSmem.q + s * kSmem.q_stage; }
  __device__ __forceinline__ unsigned do_tile(int s) const { return base + kSmem.dout + s * kSmem.do_stage; }
  __device__ __forceinline__ unsigned ds_tile(int wg) const { return base + kSmem.ds + wg * kSmem.ds_tile; }
  // v2: the dS^T tile of consumer warpgroup wg for the query tile in stage s.
  __device__ __forceinline__ unsigned ds_tile_v2(int s, int wg) const {
    return base + kSmem.ds + (s * kSm90ConsumerWarpgroups + wg) * kSmem.ds_tile;
  }
  __device__ __forceinline__ unsigned lse(int s) const { return base + kSmem.lse + s * BM * 4; }
  __device__ __forceinline__ unsigned delta(int s) const { return base + kSmem.delta + s * BM * 4; }
  __device__ __forceinline__ unsigned bar_kv() const { return base + kSmem.bars; }
  __device__ __forceinline__ unsigned full(int s) const { return base + kSmem.bars + 8 * (1 + s); }
  __device__ __forceinline__ unsigned empty(int s) const { return base + kSmem.bars + 8 * (1 + ST + s); }
  __device__ __forceinline__ unsigned info(int s) const { return base + kSmem.info + 16 * s; }
  // Bulk dQ path only (kDqBulk): buffer j's fp32 tile (rows kSmem.dq_row bytes apart), its barriers and
  // info slot.
  static constexpr int DQB = kWide ? 1 : sm90_bwd_dq_buffers(kV2, kDqTma);
  static_assert(kV2 || kWide || DQB == ST, "the default consumers track dQ buffers with the stage ring's position");
  // Arrivals on dq_full: both warpgroups store their own columns (v2, wide) or warpgroup 1 adds its partial.
  static constexpr unsigned kDqFullArrivals = kV2 || kWide ? 256u : 128u;
  // Wide kernel: the P^T and dS^T tiles of query tile n (n = 0, 1: its parity).
  __device__ __forceinline__ unsigned p_tile_wide(int n) const { return base + kSmem.p + n * kSmem.ds_tile; }
  __device__ __forceinline__ unsigned ds_tile_wide(int n) const { return base + kSmem.ds + n * kSmem.ds_tile; }
  __device__ __forceinline__ unsigned dq_buf(int j) const { return base + kSmem.dq + j * kSmem.dq_buf; }
  __device__ __forceinline__ unsigned dq_full(int j) const { return base + kSmem.dq_bars + 8 * j; }
  __device__ __forceinline__ unsigned dq_empty(int j) const { return base + kSmem.dq_bars + 8 * (DQB + j); }
  __device__ __forceinline__ unsigned dq_info(int j) const { return base + kSmem.dq_info + 8 * j; }
  // The rank ring (deterministic mode, bwd_dq_rank_sm90.cuh): slot i's entry and its full / empty barriers.
  static constexpr bool kRankRing = !kWide && sm90_bwd_has_rank_ring(kDqBulk, kV2, kDqTma);
  static constexpr int RS = kSm90BwdRankSlots;
  static_assert(!kRankRing || DQB == 2, "the rank ring feeds two writers, slot i to writer i % 2");
  __device__ __forceinline__ unsigned rank_slot(int i) const { return base + kSmem.dq_rank + 16 * i; }
  __device__ __forceinline__ unsigned rank_full(int i) const { return base + kSmem.dq_rank + 16 * RS + 8 * i; }
  __device__ __forceinline__ unsigned rank_empty(int i) const { return base + kSmem.dq_rank + 16 * RS + 8 * (RS + i); }
  // The buffer-gradient scratch of consumer warpgroup wg for the query tile in stage s (sm90_bwd_has_bg_scratch).
  static constexpr bool kBgScratch = sm90_bwd_has_bg_scratch(D, Dv, kV2);
  __device__ __forceinline__ unsigned bg_buf(int wg, int s) const {
    return base + kSmem.bg + (wg * ST + s) * kSm90BwdBgBufBytes;
  }
};

// Persistent backward (kPersistent, FLEXATTN_SM90_BWD_PERSISTENT): two words after the layout's end
// (tile_config_sm90_bwd.h, kSm90BwdPersistentSmem), outside BwdCfg so every default address is unchanged.
//   kv_empty (mbarrier, kEmptyArrivals = one per consumer warp): the warp has retired every GEMM that
//     reads the tile's K / V (and read the tile's info slot) -> the producer may load the next tile's.
//   kv_info: the tile the K / V behind bar_kv belong to (kv0, kv head, kv batch, the parity of bar_kv's
//     next phase; kv0 = -1: no more
//     tiles), written by the producer before its arrival on bar_kv.
template <class C>
__device__ __forceinline__ unsigned bwd_kv_empty(const C& c) {
  return c.base + C::kSmem.total;
}
template <class C>
__device__ __forceinline__ unsigned bwd_kv_info(const C& c) {
  return c.base + C::kSmem.total + 8;
}

// Arrivals on a stage's full barrier: every lane of the producer warp (each releases its own lse /
// delta stores; lane 0's arrival also carries the TMA byte count). On an empty barrier: one per
// consumer warp, after the wgmma_wait that retired its last read of the stage (kEmptyArrivals).
constexpr unsigned kBwdFullArrivals = 32;

// Named barrier ids (0 is __syncthreads): 5, 6 = "dS^T of consumer warpgroup 0 / 1 is in shared
// memory" (128 threads each; ids 1-4 belong to the forward and are not used here); in the v2 consumers, which
// have no such barrier, the warpgroup's buffer-gradient sums (bwd_consumer_v2_sm90.cuh).
constexpr int kBarDsFull0 = 5;

// Bulk dQ path (kDqBulk), per dQ buffer j:
//   named barrier 7 + j (256 threads): consumer warpgroup 0 has stored its dQ partial into buffer j
//     (bar.arrive, 128) -> consumer warpgroup 1 may add its own (bar.sync, 128);
//   dq_full(j)  (mbarrier, BwdCfg::kDqFullArrivals = 128: every thread of consumer warpgroup 1, after its adds,
//     its fence.proxy.async and, for thread 0, the info slot) -> the dQ writer warp may reduce it;
//   dq_empty(j) (mbarrier, 1 = lane 0 of the writer warp, after every lane's wait_group.read) ->
//     consumer warpgroup 0 may store into buffer j again (and warpgroup 1 may write the end marker; in
//     deterministic mode with one buffer also the second writer's end marker, after the first writer's arrival
//     on reading the first, bwd_dq_writer).
constexpr int kBarDqStored0 = 7;
// Backward v2: named barrier 9 (256 threads, both consumer warpgroups) = "both dS^T tiles of this
// query tile are in shared memory and fenced" -> either warpgroup's dQ GEMM may read them. The wide
// kernel uses it the same way for its P^T and dS^T halves.
// Backward v2 and the wide kernel with the bulk dQ path: one dQ buffer; every thread of both consumer
// warpgroups stores its columns and arrives on dq_full (kDqFullArrivals = 256); dq_empty as above.
constexpr int kBarPdSV2 = 9;
// The TMA-store epilogue (store_dk_dv_tma): 10 (256 threads) = every consumer warp has retired its last GEMM, the
// K / V slabs are free; 11, 12 (128 each) = consumer warpgroup 0 / 1 has staged its dK / dV.
constexpr int kBarDkvFree = 10;
constexpr int kBarDkvStaged0 = 11;

}  // namespace flexattn::kern::sm90
