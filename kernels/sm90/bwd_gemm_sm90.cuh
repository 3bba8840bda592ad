#pragma once
// The five GEMMs of a backward consumer warpgroup (64 kv rows, one 64-row query tile), issued
// asynchronously; each function ends with a commit and the caller decides when to wait.
//   S^T  = K_w Q^T      SS  m64 n64 k=D    A = own K half (K-major), B = Q tile (K-major)
//   dP^T = V_w dO^T     SS  m64 n64 k=Dv   A = own V half (K-major), B = dO tile (K-major)
//   dQ   = dS K_w       SS  m64 n=D k64    A = dS^T tile read MN-major (trans-a), B = own K half MN-major
//   dV  += P^T dO       RS  m64 n=Dv k64   A = P^T from registers, B = dO tile MN-major
//   dK  += dS^T Q       SS  m64 n=D k64    A = dS^T tile K-major, B = Q tile MN-major
// Every tile is [C/64 slabs][64 rows][64] with the 128B swizzle (tile_config_sm90_bwd.h), so:
// K-major: SBO 1024, k-step +32 bytes in a slab, next slab +8192; MN-major: LBO 8192 (next 64-wide slab
// of the non-reduced dim), SBO 1024, k-step of 16 rows +2048 (the forward's V recipe, checked on the
// H200; for an MN-major *A* the same fields are assumed, which no GPU run has confirmed yet).
#include "sm90/bwd_layout_sm90.cuh"
#include "sm90/ptx/wgmma.cuh"

namespace flexattn::kern::sm90 {

constexpr unsigned kBwdSlab = 64 * 128;

template <class T, int K>
__device__ __forceinline__ void gemm_k_major_64(float (&acc)[32], unsigned a_tile, unsigned b_tile) {
  const SmemDesc da = smem_desc(a_tile, 16, 1024), db = smem_desc(b_tile, 16, 1024);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    const unsigned off = (kk / 4) * kBwdSlab + (kk % 4) * 32;
    wgmma_ss<T, 64, 0>(acc, desc_at(da, off), desc_at(db, off), kk > 0 ? 1 : 0);
  }
}

// S^T and dP^T in one commit group (the element-wise step needs both).
template <class T, int D, int Dv>
__device__ __forceinline__ void issue_sdp(float (&st)[32], float (&dpt)[32], unsigned k_half, unsigned v_half,
                                          unsigned q_tile, unsigned do_tile) {
  fence_operands(st);
  fence_operands(dpt);
  wgmma_fence();
  gemm_k_major_64<T, D>(st, k_half, q_tile);
  gemm_k_major_64<T, Dv>(dpt, v_half, do_tile);
  wgmma_commit();
}

// dQ (this warpgroup's partial over its 64 kv rows), fresh each tile.
template <class T, int D>
__device__ __forceinline__ void issue_dq(float (&dq)[D / 2], unsigned ds_tile, unsigned k_half) {
  const SmemDesc da = smem_desc(ds_tile, kBwdSlab, 1024), db = smem_desc(k_half, kBwdSlab, 1024);
  fence_operands(dq);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 4; ++ks)
    wgmma_ss<T, D, 1, 1>(dq, desc_at(da, ks * 2048), desc_at(db, ks * 2048), ks > 0 ? 1 : 0);
  wgmma_commit();
}

// dV += P^T dO and dK += dS^T Q in one commit group.
template <class T, int D, int Dv>
__device__ __forceinline__ void issue_dkdv(float (&dk)[D / 2], float (&dv)[Dv / 2], unsigned (&pa)[16], unsigned ds_tile,
                                           unsigned q_tile, unsigned do_tile) {
  const SmemDesc ddo = smem_desc(do_tile, kBwdSlab, 1024), dq = smem_desc(q_tile, kBwdSlab, 1024);
  const SmemDesc dds = smem_desc(ds_tile, 16, 1024);
  fence_operands(dk);
  fence_operands(dv);
  fence_operands(pa);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    const unsigned a[4] = {pa[4 * ks], pa[4 * ks + 1], pa[4 * ks + 2], pa[4 * ks + 3]};
    wgmma_rs<T, Dv, 1>(dv, a, desc_at(ddo, ks * 2048), 1);
  }
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) wgmma_ss<T, D, 1, 0>(dk, desc_at(dds, ks * 32), desc_at(dq, ks * 2048), 1);
  wgmma_commit();
}

}  // namespace flexattn::kern::sm90
