#pragma once
// Compile-time view of one sm90 forward specialization: tile shape and shared-memory addresses of
// every tile, barrier and info slot (offsets from tile_config_sm90.h, added to the 1024-aligned base).
// kPersistent selects the persistent kernel's layout: QB Q buffers and a kv-tile count per buffer; kTall the
// three-consumer-warpgroup tile (tile_config_sm90.h sm90_fwd_tall_ok; else the usual tile). The producer and
// consumer functions take the whole FwdCfg as their template parameter C.
#include "sm90/tile_config_sm90.h"

namespace flexattn::kern::sm90 {

// The source generator defines FLEXATTN_SM90_REL_DIAG only for the variants whose forward uses the distance tables
// (fwd_rel_diag_sm90.cuh); only their layout reserves them, and the host's launch asks for the same size
// (Sm90FwdForm::rel_diag).
#if defined(FLEXATTN_SM90_REL_DIAG)
constexpr bool kSm90RelTables = true;
#else
constexpr bool kSm90RelTables = false;
#endif

// Named barrier ids (0 is __syncthreads): 1 + w = "consumer warpgroup w may issue its GEMMs" (ping-pong), then
// 1 + WG + w = epilogue of consumer warpgroup w (FwdCfg::bar_epilogue; 3, 4 with two warpgroups as before the tall
// tile, so the two-warpgroup kernels' code did not change).
constexpr int kBarSchedule0 = 1;

template <int D_, int Dv_, bool kNarrow_, bool kPersistent_ = false, bool kTall_ = false>
struct FwdCfg {
  static constexpr int D = D_, Dv = Dv_;
  static constexpr bool kNarrow = kNarrow_, kPersistent = kPersistent_;
  static constexpr Sm90FwdTile kTile = sm90_fwd_tile(D, Dv, kNarrow, kTall_);
  static constexpr bool kTall = kTile.warpgroups == 3;  // false where the tall tile does not apply
  static constexpr Sm90FwdSmem kSmem = sm90_fwd_smem_layout(D, Dv, kNarrow, kPersistent, kTall, kSm90RelTables);
  static constexpr int BM = kTile.block_m, BN = kTile.block_n, ST = kTile.stages, QB = kSmem.q_bufs;
  static constexpr int WG = kTile.warpgroups;  // consumer warpgroups
  static constexpr int kThreads = sm90_fwd_threads(D, Dv, kNarrow, kTall);
  static constexpr int kConsumerRegs = WG == 3 ? kSm90TallConsumerRegs : kSm90ConsumerRegs;
  // Arrivals on each empty barrier: one per consumer warp (a warp releases a stage once its own wgmma_wait has
  // retired the reads; per-warp rather than per-warpgroup so no warp can be behind).
  static constexpr unsigned kEmptyArrivals = WG * 4;
  static constexpr int kSlab = 64;                 // elements per slab row (128 bytes)
  static constexpr int kQSlabBytes = 64 * 128;     // one [64 rows][64] slab of a warpgroup's Q / O
  static constexpr int kKvSlabBytes = BN * 128;    // one [BN rows][64] slab of K or V
  static constexpr unsigned kQBytes = BM * D * 2;  // expect_tx of the Q barrier (every half)
  static constexpr unsigned kKBytes = BN * D * 2;
  static constexpr unsigned kVBytes = BN * Dv * 2;
  static_assert(D % 64 == 0 && Dv % 64 == 0 && D <= 256 && Dv <= 256, "sm90 head dims: 64, 128, 192, 256");
  static_assert(BM == 64 * WG && WG <= kSm90MaxConsumerWarpgroups, "one 64-row wgmma tile per consumer warpgroup");
  static_assert(kSm90ProducerRegs * 128 + kConsumerRegs * 128 * WG <= 65536, "register file");
  static_assert(QB == 1 || (QB == 2 && kPersistent), "a second Q buffer only in the persistent kernel");
  static_assert(kSmem.q_half % 1024 == 0 && kSmem.k_stage % 1024 == 0 && kSmem.v_stage % 1024 == 0,
                "128B-swizzled tiles must stay 1024-byte aligned");

  unsigned base;  // 1024-aligned shared address of the layout

  __device__ __forceinline__ unsigned q_half(int wg) const { return base + kSmem.q + wg * kSmem.q_half; }
  __device__ __forceinline__ unsigned q_half(int buf, int wg) const {
    return base + kSmem.q + (WG * buf + wg) * kSmem.q_half;
  }
  __device__ __forceinline__ unsigned k_tile(int s) const { return base + kSmem.k + s * kSmem.k_stage; }
  __device__ __forceinline__ unsigned v_tile(int s) const { return base + kSmem.v + s * kSmem.v_stage; }
  __device__ __forceinline__ unsigned bar_q(int buf = 0) const { return base + kSmem.bars + 8 * buf; }
  __device__ __forceinline__ unsigned full_k(int s) const { return base + kSmem.bars + 8 * (QB + s); }
  __device__ __forceinline__ unsigned full_v(int s) const { return base + kSmem.bars + 8 * (QB + ST + s); }
  __device__ __forceinline__ unsigned empty_k(int s) const { return base + kSmem.bars + 8 * (QB + 2 * ST + s); }
  __device__ __forceinline__ unsigned empty_v(int s) const { return base + kSmem.bars + 8 * (QB + 3 * ST + s); }
  // Every consumer warpgroup's O store has read its Q half of buffer `buf`: the producer may load
  // the next Q into it.
  __device__ __forceinline__ unsigned q_free(int buf = 0) const { return base + kSmem.bars + 8 * (QB + 4 * ST + buf); }
  FLEXATTN_HD static constexpr int bar_epilogue(int wg) { return kBarSchedule0 + WG + wg; }
  // Two ints per stage: kv tile start (-1 = no more tiles) and 1 for a full (mask-free) tile.
  __device__ __forceinline__ unsigned info(int s) const { return base + kSmem.info + 8 * s; }
  // Persistent only: the kv-tile count of the work tile whose Q is in buffer `buf` (written before its
  // full_q arrival, read after the wait on it).
  __device__ __forceinline__ unsigned kv_count(int buf) const { return base + kSmem.counts + 8 * buf; }
  // Consumer warp `warp` (0..3) of warpgroup `wg`: its distance-bias table (fwd_rel_diag_sm90.cuh).
  __device__ __forceinline__ unsigned rel_table(int wg, int warp) const {
    return base + kSmem.rel + 4 * sm90_rel_diag_table_floats(BN) * (4 * wg + warp);
  }
};

// Ring position shared by the producer and the consumers.
struct RingPos {
  int stage;
  unsigned phase;
  template <int ST>
  __device__ __forceinline__ void advance() {
    if constexpr (ST == 1) {
      phase ^= 1u;
      // stage stays 0 but is made opaque: known to be 0, every stage address became loop-invariant and was
      // hoisted out of the producer's and consumers' loops (the wide backward, the one-stage ring: 44-236
      // spilled bytes, ptxas 13.0; clean with this).
      asm volatile("" : "+r"(stage));
    } else if (++stage == ST) {
      stage = 0;
      phase ^= 1u;
    }
  }
};

// The backward's arrivals on each empty barrier: one per consumer warp of its two consumer warpgroups (the
// forward's are FwdCfg::kEmptyArrivals).
constexpr unsigned kEmptyArrivals = kSm90ConsumerWarpgroups * 4;


}  // namespace flexattn::kern::sm90
