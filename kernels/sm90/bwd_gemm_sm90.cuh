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

// acc = A B^T over k = K, both K-major 64-row tiles (B: its first 2 R rows, R = accumulators per thread; the
// wide kernel's n32 halves start 32 rows = 4096 bytes into each slab, a whole number of swizzle atoms).
template <class T, int K, int R>
__device__ __forceinline__ void gemm_k_major(float (&acc)[R], unsigned a_tile, unsigned b_tile) {
  const SmemDesc da = smem_desc(a_tile, 16, 1024), db = smem_desc(b_tile, 16, 1024);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    const unsigned off = (kk / 4) * kBwdSlab + (kk % 4) * 32;
    wgmma_ss<T, 2 * R, 0>(acc, desc_at(da, off), desc_at(db, off), kk > 0 ? 1 : 0);
  }
}

// S^T and dP^T in one commit group (the element-wise step needs both). R = 32: the first kernel's n64 tiles; R = 16:
// the wide kernel's n32 halves (q_tile / do_tile then point 32 w rows = 4096 w bytes into the stage tiles).
template <class T, int D, int Dv, int R>
__device__ __forceinline__ void issue_sdp(float (&st)[R], float (&dpt)[R], unsigned k_half, unsigned v_half,
                                          unsigned q_tile, unsigned do_tile) {
  fence_operands(st);
  fence_operands(dpt);
  wgmma_fence();
  gemm_k_major<T, D>(st, k_half, q_tile);
  gemm_k_major<T, Dv>(dpt, v_half, do_tile);
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

// ---- Backward v2 (FLEXATTN_SM90_BWD_V2, bwd_consumer_v2_sm90.cuh): FA3's order and operands ----
//   S^T and dP^T in two commit groups (P is computed while dP^T still runs);
//   dV += P^T dO   RS (as above), its own group;
//   dQ_w = dS K[:, 64w..64w+63]  SS m64 n64 k=128 (both warpgroups' dS^T tiles, trans-a; B = slab w of
//          both K halves, MN-major): each warpgroup owns half of dQ's columns over all 128 kv rows;
//   dK += dS^T Q   RS: dS^T from registers (the dP^T accumulator rounded, like P^T for dV).

// S^T = K_w Q^T, then dP^T = V_w dO^T, one commit group each (in that order).
template <class T, int D, int Dv>
__device__ __forceinline__ void issue_s_dp_v2(float (&st)[32], float (&dpt)[32], unsigned k_half, unsigned v_half,
                                              unsigned q_tile, unsigned do_tile) {
  fence_operands(st);
  fence_operands(dpt);
  wgmma_fence();
  gemm_k_major<T, D>(st, k_half, q_tile);
  wgmma_commit();
  gemm_k_major<T, Dv>(dpt, v_half, do_tile);
  wgmma_commit();
}

// acc += A B (RS): A = 64 x 64 in A-operand registers (k-step ks in a[4ks .. 4ks+3]), B = a 64-row
// 128B-swizzled tile with N columns; one commit group. v2's dV += P^T dO and dK += dS^T Q.
template <class T, int N>
__device__ __forceinline__ void issue_rs_k64(float (&acc)[N / 2], unsigned (&a)[16], unsigned b_tile) {
  const SmemDesc db = smem_desc(b_tile, kBwdSlab, 1024);
  fence_operands(acc);
  fence_operands(a);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    const unsigned ak[4] = {a[4 * ks], a[4 * ks + 1], a[4 * ks + 2], a[4 * ks + 3]};
    wgmma_rs<T, N, 1>(acc, ak, desc_at(db, ks * 2048), 1);
  }
  wgmma_commit();
}

// dQ[:, 64 w .. 64 w + 63] = dS K[:, same columns], fresh, one commit group: k-steps 0-3 read kv rows
// 0-63 (dS^T tile ds0 = warpgroup 0's, K half 0), 4-7 rows 64-127 (ds1, K half 1). A = dS^T tile
// MN-major (trans-a, as issue_dq); B = 64-column slab `slab` of a K half, MN-major (k-step of 16 kv rows
// +2048 bytes; one slab, so LBO is unused).
template <class T>
__device__ __forceinline__ void issue_dq_v2(float (&dq)[32], unsigned ds0, unsigned ds1, unsigned k0_slab,
                                            unsigned k1_slab) {
  const SmemDesc da0 = smem_desc(ds0, kBwdSlab, 1024), da1 = smem_desc(ds1, kBwdSlab, 1024);
  const SmemDesc db0 = smem_desc(k0_slab, kBwdSlab, 1024), db1 = smem_desc(k1_slab, kBwdSlab, 1024);
  fence_operands(dq);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 4; ++ks)
    wgmma_ss<T, 64, 1, 1>(dq, desc_at(da0, ks * 2048), desc_at(db0, ks * 2048), ks > 0 ? 1 : 0);
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) wgmma_ss<T, 64, 1, 1>(dq, desc_at(da1, ks * 2048), desc_at(db1, ks * 2048), 1);
  wgmma_commit();
}

// ---- Wide kernel (D = Dv = 256, bwd_consumer_wide_sm90.cuh): warpgroup w of the 64-row kv tile ----
//   S^T_w  = K Q_w^T     SS m64 n32 k=D    A = the kv tile (K-major), B = query rows 32w.. of the stage
//   dP^T_w = V dO_w^T    SS m64 n32 k=Dv   (the same, V and dO)
//   dV_w  += P^T dO_w    SS m64 n128 k64   A = P^T tile K-major, B = dO columns 128w.. MN-major
//   dK_w  += dS^T Q_w    SS m64 n128 k64   A = dS^T tile K-major, B = Q columns 128w.. MN-major
//   dQ_w   = dS K_w      SS m64 n128 k64   A = dS^T tile MN-major (trans-a, as issue_dq), B = K columns 128w..
// (X_w: columns 128w..128w+127 = 64-wide slabs 2w and 2w+1; LBO 8192 steps between them.)

// (S^T_w and dP^T_w: issue_sdp with R = 16.)

// dV_w += P^T dO_w and dK_w += dS^T Q_w (one commit group); do_cols / q_cols: slab 2w of the stage tiles.
template <class T>
__device__ __forceinline__ void issue_dkdv_wide(float (&dk)[64], float (&dv)[64], unsigned p_tile, unsigned ds_tile,
                                                unsigned q_cols, unsigned do_cols) {
  const SmemDesc dp = smem_desc(p_tile, 16, 1024), dds = smem_desc(ds_tile, 16, 1024);
  const SmemDesc ddo = smem_desc(do_cols, kBwdSlab, 1024), dq = smem_desc(q_cols, kBwdSlab, 1024);
  fence_operands(dk);
  fence_operands(dv);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) wgmma_ss<T, 128, 1, 0>(dv, desc_at(dp, ks * 32), desc_at(ddo, ks * 2048), 1);
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) wgmma_ss<T, 128, 1, 0>(dk, desc_at(dds, ks * 32), desc_at(dq, ks * 2048), 1);
  wgmma_commit();
}

}  // namespace flexattn::kern::sm90
