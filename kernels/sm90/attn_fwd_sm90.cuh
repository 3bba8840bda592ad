#pragma once
// Forward attention, sm90 family (Hopper, sm_90a; FA3-class warp specialization, written from our own
// PTX wrappers in sm90/ptx/). Persistent: one CTA per SM walks the (128-row query tile, query head,
// batch) tiles (fwd_scheduler_sm90.cuh), 384 threads:
//   warpgroup 0   producer: setmaxnreg 24; one thread issues all TMA loads (fwd_producer_sm90.cuh)
//   warpgroups 1-2 consumers: setmaxnreg 240; 64 query rows each, wgmma SS for Q K^T, RS for P V,
//                 mods on the accumulator registers, exp2 online softmax (fwd_consumer_sm90.cuh),
//                 TMA-store epilogue (fwd_epilogue_sm90.cuh).
// Semantics are those of the sm80 family (variant.cuh): mask lists partial then full, mask_mod only on
// partial tiles, wrapped indices on padded lanes, -inf for kv >= S, fully masked rows give O = 0,
// lse = max = -inf, natural-log lse.
//
// Entry (generated source, runtime/kernel_source_sm90.cc), compiled for sm_90a only:
//   extern "C" __global__ void __launch_bounds__(kSm90Threads, 1)
//   flexattn_fwd(const __grid_constant__ AttnParams p) { attn_fwd_sm90<FlexVariant, bf16, 128, 128, false>(p); }
// __grid_constant__ is required: TMA reads q_map..o_map through their parameter-space addresses.
// Launch: sm90_fwd_launch(D, Dv, narrow, ...) (tile_config_sm90.h); the host encodes the maps (runtime/tma_sm90.cc).
#include "common/params.h"
#include "sm90/fwd_consumer_sm90.cuh"
#include "sm90/fwd_layout_sm90.cuh"
#include "sm90/fwd_producer_sm90.cuh"
#include "sm90/fwd_scheduler_sm90.cuh"
#include "sm90/ptx/fence.cuh"
#include "sm90/ptx/mbarrier.cuh"
#include "sm90/ptx/setmaxnreg.cuh"
#include "sm90/ptx/smem.cuh"
#include "sm90/tile_config_sm90.h"

namespace flexattn::kern {

// kNarrow: the narrow kv tile of tile_config_sm90.h (the host picks it, runtime/tma_sm90.h, and must
// encode the K/V maps and check the mask blocks with the same choice).
// kPingPong: consumer warpgroups alternate their GEMM issue (on by default, as FA3 for hdim <= 128).
template <class V, class T, int D, int Dv, bool kNarrow = false, bool kPingPong = true>
__device__ __forceinline__ void attn_fwd_sm90(const AttnParams& p) {
  using namespace sm90;
  extern __shared__ __align__(1024) unsigned char flexattn_smem_sm90[];
  const FwdCfg<D, Dv, kNarrow> c{(smem_u32(flexattn_smem_sm90) + 1023u) & ~1023u};
  const FwdTileOrder order = fwd_tile_order<D, Dv, FwdCfg<D, Dv, kNarrow>::BM>(p);
  const int wg = threadIdx.x >> 7;

  if (threadIdx.x == 0) {
    mbar_init(c.bar_q(), 1);
#pragma unroll
    for (int s = 0; s < FwdCfg<D, Dv, kNarrow>::ST; ++s) {
      mbar_init(c.full_k(s), 1);
      mbar_init(c.full_v(s), 1);
      mbar_init(c.empty_k(s), kEmptyArrivals);
      mbar_init(c.empty_v(s), kEmptyArrivals);
    }
    mbar_init(c.q_free(), kSm90ConsumerWarpgroups);
    fence_mbarrier_init();
  }
  __syncthreads();

  // One branch per role, each starting with its setmaxnreg (ptxas ignores them otherwise, C7508).
  if (wg == 0) {
    setmaxnreg_dec<kSm90ProducerRegs>();
    if (threadIdx.x == 0) fwd_producer<D, Dv, kNarrow>(p, c, order);
  } else {
    setmaxnreg_inc<kSm90ConsumerRegs>();
    fwd_consumer<V, T, D, Dv, kNarrow, kPingPong>(p, c, wg - 1, order);
  }
}

}  // namespace flexattn::kern
