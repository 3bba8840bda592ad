#pragma once
// The two GEMMs of a consumer warpgroup, issued asynchronously (each ends with a commit; the caller
// decides when to wait):
//   S = Q K^T  SS wgmma, m64 x BN x D: A = the warpgroup's Q half, B = the K stage, both K-major.
//   O += P V   RS wgmma, m64 x Dv x BN: A = P in registers, B = the V stage, MN-major (trans-b = 1).
// Tile layouts: tile_config_sm90.h (C/64 slabs of [rows][64], 128B swizzle).
#include "sm90/fwd_layout_sm90.cuh"
#include "sm90/ptx/redux.cuh"
#include "sm90/ptx/wgmma.cuh"

namespace flexattn::kern::sm90 {

// FLEXATTN_SM90_UDESC=1 (the source generator defines FLEXATTN_SM90_UNIFORM_DESC): the stage addresses
// pass through redux.sync (all lanes hold the same value), whose result lives in a uniform register, so
// ptxas builds the wgmma descriptors in the uniform datapath. Without it the ring position is a
// per-thread value and every wgmma of the D=64 mainloop paid R2UR x2 + the descriptor's constant high
// word through IMAD.MOV + the offset add (about 60 of the ~480 instructions per kv tile, session 5
// profile of the dense D=64 forward).
__device__ __forceinline__ unsigned stage_addr(unsigned a) {
#if defined(FLEXATTN_SM90_UNIFORM_DESC)
  return redux_or(a, 0xffffffffu);
#else
  return a;
#endif
}

template <class T, int D, int BN>
__device__ __forceinline__ void issue_qk(float (&s)[BN / 2], unsigned q_half, unsigned k_tile) {
  const SmemDesc da = smem_desc(stage_addr(q_half), 16, 1024), db = smem_desc(stage_addr(k_tile), 16, 1024);
  fence_operands(s);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const unsigned in_slab = (kk % 4) * 32;  // 16 elements = 32 bytes inside the 128-byte row
    wgmma_ss<T, BN, 0>(s, desc_at(da, (kk / 4) * (64 * 128) + in_slab), desc_at(db, (kk / 4) * (BN * 128) + in_slab),
                       kk > 0 ? 1 : 0);
  }
  wgmma_commit();
}

template <class T, int Dv, int BN>
__device__ __forceinline__ void issue_pv(float (&o)[Dv / 2], unsigned (&pa)[BN / 4], unsigned v_tile) {
  const SmemDesc db = smem_desc(stage_addr(v_tile), BN * 128, 1024);  // LBO: next 64-wide Dv slab
  fence_operands(o);
  fence_operands(pa);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < BN / 16; ++ks) {
    const unsigned a[4] = {pa[4 * ks], pa[4 * ks + 1], pa[4 * ks + 2], pa[4 * ks + 3]};
    wgmma_rs<T, Dv, 1>(o, a, desc_at(db, ks * 16 * 128), 1);
  }
  wgmma_commit();
}

}  // namespace flexattn::kern::sm90
