#pragma once
// Forward attention, sm90 family (Hopper, sm_90a; FA3-class warp specialization, written from our own
// PTX wrappers in sm90/ptx/). The CTAs walk the (128-row query tile, query head, batch) tiles with a
// stride of the grid (fwd_scheduler_sm90.cuh): one tile each by default, one CTA per SM with
// kPersistent. 384 threads (512 with kTall: 192-row tiles, three consumer warpgroups at setmaxnreg 160):
//   warpgroup 0   producer: setmaxnreg 24; one thread issues all TMA loads (fwd_producer_sm90.cuh)
//   warpgroups 1-2 consumers (1-3 with kTall): setmaxnreg 240 (160); 64 query rows each, wgmma SS for Q K^T, RS for P V,
//                 mods on the accumulator registers, exp2 online softmax (fwd_consumer_sm90.cuh),
//                 TMA-store epilogue (fwd_epilogue_sm90.cuh).
// Semantics are those of the sm80 family (variant.cuh): mask lists partial then full, mask_mod only on
// partial tiles, wrapped indices on padded lanes, -inf for kv >= S, fully masked rows give O = 0,
// lse = max = -inf, natural-log lse.
//
// Entry (generated source, runtime/kernel_source_sm90.cc), compiled for sm_90a only:
//   extern "C" __global__ void __launch_bounds__(384, 1)  (sm90_fwd_threads: 512 with kTall)
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
// kPersistent: the persistent kernel (FLEXATTN_SM90_PERSISTENT=1, runtime/kernel_source_sm90.cc): its
// own shared-memory layout (two Q buffers at d <= 128) and handshake (fwd_scheduler_sm90.cuh). Both
// kernels are correct for either grid; the launch must give the persistent one its larger layout.
// kTall: the three-consumer-warpgroup tile (tile_config_sm90.h sm90_fwd_tall_ok, FLEXATTN_SM90_FWD_TALL; the host
// takes it only for calls without a block mask and launches 512 threads and the tall layout).
// kPingPong: consumer warpgroups take turns at their GEMM issue (on by default, as FA3 for hdim <= 128).
template <class V, class T, int D, int Dv, bool kNarrow = false, bool kPersistent = false, bool kTall = false,
          bool kPingPong = true>
__device__ __forceinline__ void attn_fwd_sm90(const AttnParams& p) {
  using namespace sm90;
  using C = FwdCfg<D, Dv, kNarrow, kPersistent, kTall>;
  static_assert(C::kTall == kTall, "kTall: only where sm90_fwd_tall_ok (D = Dv = 64, not narrow)");
  extern __shared__ __align__(1024) unsigned char flexattn_smem_sm90[];
  const C c{(smem_u32(flexattn_smem_sm90) + 1023u) & ~1023u};
  const FwdTileOrder order = fwd_tile_order<D, Dv, C::BM>(p);
  const int wg = threadIdx.x >> 7;

  if constexpr (kPersistent) {
    // A launch sized for the default layout (the flag flipped between the compile of this kernel and
    // the launch) would overrun shared memory: stop instead.
    unsigned dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    if (dyn < (unsigned)sm90_fwd_smem(D, Dv, kNarrow, true, kTall)) __trap();
  }
  if constexpr (kTall) {
    // A launch with the usual kernel's 384 threads would never run the third consumer warpgroup, whose turn the
    // others wait for: stop instead of hanging.
    if (blockDim.x != unsigned(C::kThreads)) __trap();
  }
  if (threadIdx.x == 0) {
#pragma unroll
    for (int qb = 0; qb < C::QB; ++qb) mbar_init(c.bar_q(qb), 1);
#pragma unroll
    for (int s = 0; s < C::ST; ++s) {
      mbar_init(c.full_k(s), 1);
      mbar_init(c.full_v(s), 1);
      mbar_init(c.empty_k(s), C::kEmptyArrivals);
      mbar_init(c.empty_v(s), C::kEmptyArrivals);
    }
#pragma unroll
    for (int qb = 0; qb < C::QB; ++qb) mbar_init(c.q_free(qb), C::WG);
    fence_mbarrier_init();
  }
  __syncthreads();

  // One branch per role, each starting with its setmaxnreg (ptxas ignores them otherwise, C7508).
  if (wg == 0) {
    setmaxnreg_dec<kSm90ProducerRegs>();
    if (threadIdx.x == 0) fwd_producer(p, c, order);
  } else {
    setmaxnreg_inc<C::kConsumerRegs>();
    fwd_consumer<V, T, C, kPingPong>(p, c, wg - 1, order);
  }
}

}  // namespace flexattn::kern
