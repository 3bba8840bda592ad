#pragma once
// Compile-time view of one sm90 backward specialization: addresses of every tile, barrier and info
// slot (offsets from tile_config_sm90_bwd.h added to the 1024-aligned base), and the barrier protocol.
#include "sm90/fwd_layout_sm90.cuh"
#include "sm90/tile_config_sm90_bwd.h"

namespace flexattn::kern::sm90 {

template <int D, int Dv>
struct BwdCfg {
  static constexpr Sm90BwdSmem kSmem = sm90_bwd_smem_layout(D, Dv);
  static constexpr int BM = kSm90BwdBlockM, BN = kSm90BwdBlockN, ST = kSm90BwdStages;
  static constexpr int kSlabBytes = 64 * 128;  // one [64 rows][64] slab (every box has 64 rows)
  static constexpr unsigned kKvBytes = BN * (D + Dv) * 2;  // expect_tx of the kv barrier
  static constexpr unsigned kQdoBytes = BM * (D + Dv) * 2;  // expect_tx of a stage's full barrier
  static_assert(sm90_bwd_head_dims_ok(D, Dv), "sm90 backward head dims: 64 or 128");
  static_assert(BM == 64, "one m64 / k64 query tile per stage (the dS^T tile is one 128-byte slab wide)");

  unsigned base;  // 1024-aligned shared address of the layout

  __device__ __forceinline__ unsigned k_half(int wg) const { return base + kSmem.k + wg * kSmem.k_half; }
  __device__ __forceinline__ unsigned v_half(int wg) const { return base + kSmem.v + wg * kSmem.v_half; }
  __device__ __forceinline__ unsigned q_tile(int s) const { return base + kSmem.q + s * kSmem.q_stage; }
  __device__ __forceinline__ unsigned do_tile(int s) const { return base + kSmem.dout + s * kSmem.do_stage; }
  __device__ __forceinline__ unsigned ds_tile(int wg) const { return base + kSmem.ds + wg * kSmem.ds_tile; }
  __device__ __forceinline__ unsigned lse(int s) const { return base + kSmem.lse + s * BM * 4; }
  __device__ __forceinline__ unsigned delta(int s) const { return base + kSmem.delta + s * BM * 4; }
  __device__ __forceinline__ unsigned bar_kv() const { return base + kSmem.bars; }
  __device__ __forceinline__ unsigned full(int s) const { return base + kSmem.bars + 8 * (1 + s); }
  __device__ __forceinline__ unsigned empty(int s) const { return base + kSmem.bars + 8 * (1 + ST + s); }
  __device__ __forceinline__ unsigned info(int s) const { return base + kSmem.info + 16 * s; }
};

// Arrivals on a stage's full barrier: every lane of the producer warp (each releases its own lse /
// delta stores; lane 0's arrival also carries the TMA byte count). On an empty barrier: one per
// consumer warp, after the wgmma_wait that retired its last read of the stage (kEmptyArrivals).
constexpr unsigned kBwdFullArrivals = 32;

// Named barrier ids (0 is __syncthreads): 5, 6 = "dS^T of consumer warpgroup 0 / 1 is in shared
// memory" (128 threads each; ids 1-4 belong to the forward and are not used here).
constexpr int kBarDsFull0 = 5;

}  // namespace flexattn::kern::sm90
