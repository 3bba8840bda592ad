#pragma once
// Backward attention, sm90 family (Hopper, sm_90a), main kernel: dK, dV and the atomic dQ partials.
// One CTA per (128-row kv tile, kv head, kv batch), 384 threads:
//   warpgroup 0    producer: setmaxnreg 40; warp 0 walks the query tiles that attend this kv tile
//                  (the sm80 backward's order) and feeds Q, dO (TMA), lse, delta through a 2-stage
//                  mbarrier ring (bwd_producer_sm90.cuh); warps 1-3 exit (with kDqBulk warp 1 is the
//                  dQ writer: bulk reductions of the shared dQ tile into dq_accum; in deterministic mode
//                  warp 2 is a second writer, bwd_dq_writer, and with the TMA dQ path warp 3 feeds both the
//                  ranks, bwd_dq_rank_sm90.cuh).
//   warpgroups 1-2 consumers: setmaxnreg 232; 64 kv rows each, S^T / dP^T on wgmma, the element-wise
//                  backward on the accumulator registers, dV / dK / dQ on wgmma (bwd_consumer_sm90.cuh;
//                  with kV2 bwd_consumer_v2_sm90.cuh, and 24 / 240 registers when kDqBulk as well).
// Semantics are the sm80 backward's (it is the oracle; kernels/sm80/attn_bwd_sm80.cuh): same walk,
// same per-entry function, dK / dV written once per CTA (deterministic), dQ partials added into the
// fp32 dq_accum. The rest of the backward is the sm80 family's (preprocess, dq_convert). Deterministic
// mode: with the bulk dQ paths (non-persistent) the writer adds the partials in a fixed order
// (bwd_dq_order_sm90.h); otherwise the sm80 bwd_dq pass computes dQ and this kernel skips it.
//
// Entry (generated source, runtime/sm90_backward.cc), compiled for sm_90a only:
//   extern "C" __global__ void __launch_bounds__(kSm90Threads, 1)
//   flexattn_bwd(const __grid_constant__ AttnParams p) { attn_bwd_sm90<FlexVariant, bf16, 128, 128>(p); }
// TMA maps (host, runtime/sm90_backward.cc): q_map = Q, k_map = K, v_map = V, o_map = dO (the
// backward never reads O here), all with 64-row boxes.
#include "common/params.h"
#include "sm90/bwd_consumer_sm90.cuh"
#include "sm90/bwd_consumer_v2_sm90.cuh"
#include "sm90/bwd_consumer_wide_sm90.cuh"
#include "sm90/bwd_dq_order_sm90.cuh"
#include "sm90/bwd_dq_rank_sm90.cuh"
#include "sm90/bwd_cta_order_sm90.cuh"
#include "sm90/bwd_layout_sm90.cuh"
#include "sm90/bwd_producer_sm90.cuh"
#include "sm90/ptx/redux.cuh"
#include "sm90/ptx/fence.cuh"
#include "sm90/ptx/mbarrier.cuh"
#include "sm90/ptx/setmaxnreg.cuh"
#include "sm90/ptx/smem.cuh"
#include "sm90/tile_config_sm90_bwd.h"

namespace flexattn::kern {

// kDqBulk (FLEXATTN_SM90_BWD_DQ_BULK, the default; =0 selects the per-element path): dQ summed over both consumer warpgroups in shared memory
// and pushed by one bulk reduction per row (docs/kernels_sm90.md, "Bulk dQ"); false generates exactly
// the code that existed before the option. kV2 (FLEXATTN_SM90_BWD_V2, opt-in, D = 128): the consumers
// run bwd_consumer_v2 (FA3's per-tile schedule) on the v2 layout; with kDqBulk its dQ goes through one
// shared buffer and the roles take 24 / 240 registers. false generates exactly the code that existed
// before that option.
// kDqTma (FLEXATTN_SM90_BWD_V3, opt-in, with kDqBulk; v2 at D = 128, the first kernel's two dQ buffers
// at D = 64; the runtime never selects it for the first kernel at D = 128): the dQ tile is swizzled for the 128B-swizzled p.dq_map and the writer adds it
// with D / 32 TMA tensor reductions instead of one bulk reduction per row; false generates exactly the
// code that existed before that option.
// kPersistent (FLEXATTN_SM90_BWD_PERSISTENT, opt-in; docs/kernels_sm90.md, "Persistent backward"): a
// grid of min(CTAs, work tiles) CTAs (sm90_bwd_persistent_launch, one per SM) that loop over the work
// tiles; the producer publishes each tile (bwd_kv_info) and the consumers release its K / V on the
// kv_empty barrier as soon as its last query tile is done, so the next tile's K / V and first query
// tiles load while they write dK / dV. Correct for any grid; false generates exactly the code that
// existed before the option.
template <class V, class T, int D, int Dv, bool kDqBulk = false, bool kV2 = false, bool kDqTma = false,
          bool kPersistent = false>
__device__ __forceinline__ void attn_bwd_sm90(const AttnParams& p) {
  using namespace sm90;
  using C = BwdCfg<D, Dv, kDqBulk, kV2, kDqTma>;
  extern __shared__ __align__(1024) unsigned char flexattn_smem_sm90[];
  const C c{(smem_u32(flexattn_smem_sm90) + 1023u) & ~1023u};
  // Ordered dQ (deterministic mode, bwd_dq_order_sm90.h): kv tiles launch in descending order.
#if defined(FLEXATTN_SM90_BWD_GRID_ORDER)
  // The non-persistent kernel's grouped launch order (FLEXATTN_SM90_BWD_HEAD_GROUPS; sm90_bwd_grid_tile,
  // p.bwd_head_group 1 = the grid's own order). Through redux_or: uniform registers, as blockIdx was (computed
  // per-thread values spilled the 24-register warps of the first kernel's bulk dQ path at D = 128).
  // The persistent kernel takes its tiles from its queue: the generator never emits the define with it.
  static_assert(!kPersistent, "FLEXATTN_SM90_BWD_GRID_ORDER is for the non-persistent kernel");
  // FLEXATTN_SM90_BWD_CTA_ORDER: the launch position's natural index from the order (bwd_cta_order_sm90.cuh).
  const int linear = int(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
  const int natural =
      p.bwd_cta_order != nullptr ? int(redux_or(unsigned(p.bwd_cta_order[linear]), 0xffffffffu)) : linear;
  const Sm90BwdGridTile at =
      sm90_bwd_grid_tile(natural, int(gridDim.x), int(gridDim.y), int(gridDim.z), p.bwd_head_group);
  const int kv_tile = int(redux_or(unsigned(abs(p.bwd_kv_flip - at.rank)), 0xffffffffu));
  const int hk = int(redux_or(unsigned(at.hk), 0xffffffffu));
  const int bz = int(redux_or(unsigned(at.bz), 0xffffffffu));
#else
  const int kv_tile = kPersistent ? int(blockIdx.x) : abs(p.bwd_kv_flip - int(blockIdx.x));
  const int hk = blockIdx.y, bz = blockIdx.z;
#endif
  const int kv0 = kv_tile * C::BN;
  const int wg = threadIdx.x >> 7;
  if constexpr (!kPersistent) {
    if (kv0 >= p.S) return;  // whole CTA, before any barrier
  }

  // The rank warp (bwd_dq_rank_sm90.cuh) runs with the ordered writers; it takes part in the stage ring.
  const bool rank_warp = bwd_dq_rank_warp_runs<C, kDqBulk, kPersistent>(p);
  if (threadIdx.x == 0) {
    mbar_init(c.bar_kv(), 1);
    if constexpr (kPersistent) mbar_init(bwd_kv_empty(c), kEmptyArrivals);
#pragma unroll
    for (int s = 0; s < C::ST; ++s) {
      mbar_init(c.full(s), kBwdFullArrivals);
      mbar_init(c.empty(s), bwd_dq_stage_empty_arrivals(rank_warp));
    }
    if constexpr (kDqBulk) {
#pragma unroll
      for (int j = 0; j < C::DQB; ++j) {
        mbar_init(c.dq_full(j), C::kDqFullArrivals);
        mbar_init(c.dq_empty(j), 1);
      }
      if (rank_warp) {
#pragma unroll
        for (int j = 0; j < C::RS; ++j) {
          mbar_init(c.rank_full(j), 1);
          mbar_init(c.rank_empty(j), 1);
        }
      }
    }
    fence_mbarrier_init();
  }
  __syncthreads();

  // One branch per role, each starting with its setmaxnreg (ptxas ignores them otherwise, C7508).
  if (wg == 0) {
    setmaxnreg_dec<C::kProducerRegs>();
    if constexpr (kDqBulk) {
      // Warp index through a shuffle (CUTLASS's canonical_warp_idx_sync): ptxas then knows the two
      // roles never share a warp and keeps the producer's walk on the uniform datapath (with a plain
      // threadIdx test it moved it to vector registers and spilled).
      const int warp = __shfl_sync(0xffffffffu, (int)threadIdx.x >> 5, 0);
      if (warp == 0) {
        if constexpr (kPersistent)
          bwd_producer_persistent<D, Dv>(p, c, threadIdx.x & 31);
        else
          bwd_producer<D, Dv>(p, c, kv0, hk, bz, threadIdx.x & 31);
      } else if (warp == 1 || warp == 2) {  // warp 2: the second writer in deterministic mode (bwd_dq_writer)
        bwd_dq_writer<D, Dv, kDqBulk, kV2, kDqTma, kPersistent>(p, c, threadIdx.x & 31, kv_tile, warp - 1);
      } else if (rank_warp) {  // warp 3: the rank warp of the ordered writers
        bwd_dq_rank_warp(p, c, kv_tile, threadIdx.x & 31);
      }
    } else if (threadIdx.x < 32) {
      if constexpr (kPersistent)
        bwd_producer_persistent<D, Dv>(p, c, threadIdx.x);
      else
        bwd_producer<D, Dv>(p, c, kv0, hk, bz, threadIdx.x);
    }
  } else {
    setmaxnreg_inc<C::kConsumerRegs>();
    if constexpr (C::kWide)
      bwd_consumer_wide<V, T, D, Dv>(p, c, wg - 1, kv0, hk, bz);
    else if constexpr (kV2)
      bwd_consumer_v2<V, T, D, Dv, kDqBulk, kDqTma, kPersistent>(p, c, wg - 1, kv0, hk, bz);
    else
      bwd_consumer<V, T, D, Dv, kDqBulk, kDqTma, kPersistent>(p, c, wg - 1, kv0, hk, bz);
  }
}

}  // namespace flexattn::kern
