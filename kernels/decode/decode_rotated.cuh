#pragma once
// Rotated K/V rows for the decode bulk ring (FLEXATTN_DECODE_ROT_ROWS; decode_config.h). Why: the padded ring row
// (2 x dim + 16 bytes) puts half the rows' shared-memory starts at an odd multiple of 16 bytes past a 128-byte line,
// and a row's bulk copy is then cut where its destination crosses a line, mid-way through a 32-byte sector of the
// source: that sector crosses the L2 -> SM path twice. ncu, H100, one flushed 8x8k step (bench/lab/round/s43p.sh):
// 303 MB into L1/shared memory for 269 MB of K and V (+12.9 %, the 12.5 % this predicts), 2.46 M L2 sector hits and
// 5.3 M requests, against cuDNN's 269 MB, 5 K hits and 2.1 M requests; kernel 100.9 vs 93.9 us.
//
// Here a row of RB = 2 x dim bytes (a power of two, >= 128) sits unpadded at r x RB with its bytes rotated by
// 32 x (r % 4): byte j at (j + rot) % RB. Its copy is two bulk copies (one when rot = 0) whose cuts all fall on
// 32-byte sector edges of the source. ldmatrix reads of 8 rows at one column then hit 4 distinct 16-byte bank
// groups (2-way conflicts) instead of 8: shared-memory wavefronts for fewer L2 bytes.
#include "common/params.h"
#include "sm80/ptx/ldmatrix.cuh"
#include "sm80/ptx/mma.cuh"
#include "sm80/warp_gemm.cuh"

namespace flexattn::kern {

// Where byte `byte` of row r of a rotated tile with rows of rb bytes sits, from the tile's start; the copies
// (decode_bulk_row) and the fragment loads both go through it.
FLEXATTN_HD_INLINE constexpr int decode_rot_offset(int r, int byte, int rb) { return r * rb + ((byte + 32 * (r & 3)) & (rb - 1)); }
template <int RB>
__device__ __forceinline__ unsigned decode_rot_addr(unsigned base, int r, int byte) {
  static_assert(RB >= 128 && (RB & (RB - 1)) == 0, "rotated rows: a power-of-two row of at least 128 bytes");
  return base + decode_rot_offset(r, byte, RB);
}

// s[16 x NI*8] += Q[m0.., 0..D) K[n0.., 0..D)^T: Q padded (stride SQ elements), K rotated rows of 2 D bytes.
template <class T, int NI, int D, int SQ>
__device__ __forceinline__ void decode_qk_rot(float (&acc)[1][NI][4], unsigned sq, int m0, unsigned sk, int n0,
                                              int lane) {
  static_assert(NI % 2 == 0 && D % 16 == 0, "decode_qk_rot shape");
#pragma unroll
  for (int k0 = 0; k0 < D; k0 += 16) {
    unsigned a[4];
    ld_a<SQ>(a, sq, m0, k0, lane);
#pragma unroll
    for (int nj = 0; nj < NI / 2; ++nj) {
      const int r = n0 + nj * 16 + (lane & 7) + (lane >> 4) * 8, c = k0 + ((lane >> 3) & 1) * 8;
      unsigned b[4];
      ldsm_x4(b, decode_rot_addr<2 * D>(sk, r, 2 * c));
      mma_16816<T>(acc[0][2 * nj], a, b[0], b[1]);
      mma_16816<T>(acc[0][2 * nj + 1], a, b[2], b[3]);
    }
  }
}

// o[16 x DI*8] += P[16 x 16 KS] V[row0.., 0..DI*8): P in registers (acc_to_a), V rotated rows of 2 Dv bytes.
template <class T, int DI, int KS, int Dv>
__device__ __forceinline__ void decode_pv_rot(float (&acc)[1][DI][4], const unsigned (&a)[1][KS][4], unsigned sv,
                                              int row0, int lane) {
  static_assert(DI % 2 == 0 && DI * 8 == Dv, "decode_pv_rot shape");
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
#pragma unroll
    for (int nj = 0; nj < DI / 2; ++nj) {
      const int r = row0 + ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, c = nj * 16 + (lane >> 4) * 8;
      unsigned b[4];
      ldsm_x4_trans(b, decode_rot_addr<2 * Dv>(sv, r, 2 * c));
      mma_16816<T>(acc[0][2 * nj], a[0][ks], b[0], b[1]);
      mma_16816<T>(acc[0][2 * nj + 1], a[0][ks], b[2], b[3]);
    }
  }
}

}  // namespace flexattn::kern
