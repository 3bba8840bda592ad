#pragma once
// Warp-level tensor-core GEMM pieces on shared-memory tiles. Tiles are row-major with a row stride of
// STR elements, STR = cols + 8: the 16-byte pad makes the stride an odd number of 16-byte units, so the
// eight rows one ldmatrix phase reads fall in eight distinct bank groups (conflict-free for every
// head dim, including 96, where an XOR swizzle on 16-byte chunks would not stay inside the row).
//
// Naming: an operand "[m][k]" is stored with m as the row; "_t" loaders read the transposed storage.
#include "common/numeric.cuh"
#include "common/params.h"
#include "sm80/ptx/ldmatrix.cuh"
#include "sm80/ptx/mma.cuh"
#include "sm80/ptx/smem.cuh"
#include "sm80/tile_config.h"

namespace flexattn::kern {

template <int ROWS, int COLS, int NW>
struct WarpTile {
  static constexpr int WC = warp_cols_for(ROWS, COLS, NW);
  static_assert(WC > 0, "no warp tiling: rows and cols must split into 16-multiples");
  static constexpr int WR = NW / WC;
  static constexpr int MI = ROWS / WR / 16;  // 16-row atoms per warp
  static constexpr int NI = COLS / WC / 8;   // 8-col atoms per warp (even)
  static __device__ __forceinline__ int row0(int warp) { return (warp / WC) * MI * 16; }
  static __device__ __forceinline__ int col0(int warp) { return (warp % WC) * NI * 8; }
};

// A 16x16 at (m0, k0) from [m][k] storage.
template <int STR>
__device__ __forceinline__ void ld_a(unsigned (&a)[4], unsigned base, int m0, int k0, int lane) {
  const int r = m0 + (lane & 7) + ((lane >> 3) & 1) * 8, c = k0 + (lane >> 4) * 8;
  ldsm_x4(a, base + (r * STR + c) * 2);
}
// A 16x16 at (m0, k0) from [k][m] storage.
template <int STR>
__device__ __forceinline__ void ld_a_t(unsigned (&a)[4], unsigned base, int m0, int k0, int lane) {
  const int r = k0 + (lane & 7) + (lane >> 4) * 8, c = m0 + ((lane >> 3) & 1) * 8;
  ldsm_x4_trans(a, base + (r * STR + c) * 2);
}
// Where the B operand's rows sit: addr(base, r, c) is the shared-memory address of element (r, c), c a multiple
// of 8 (one 16-byte ldmatrix row). PaddedRows, the tiles above, is every kernel's; the decode TMA ring's swizzled
// slabs (decode/decode_tma.cuh) are the other.
template <int STR>
struct PaddedRows {
  static __device__ __forceinline__ unsigned addr(unsigned base, int r, int c) { return base + (r * STR + c) * 2; }
};
// B for n atoms n0 and n0+8 (b[0..1], b[2..3]), k0..k0+15, from [n][k] storage.
template <class Rows>
__device__ __forceinline__ void ld_b(unsigned (&b)[4], unsigned base, int n0, int k0, int lane) {
  const int r = n0 + (lane & 7) + (lane >> 4) * 8, c = k0 + ((lane >> 3) & 1) * 8;
  ldsm_x4(b, Rows::addr(base, r, c));
}
// The same from [k][n] storage.
template <class Rows>
__device__ __forceinline__ void ld_b_t(unsigned (&b)[4], unsigned base, int n0, int k0, int lane) {
  const int r = k0 + (lane & 7) + ((lane >> 3) & 1) * 8, c = n0 + (lane >> 4) * 8;
  ldsm_x4_trans(b, Rows::addr(base, r, c));
}

// acc[MI][NI] += A[m0.., 0..K) * B[0..K, n0..), both operands in shared memory.
// BRows: where B's rows sit (PaddedRows<SB> unless given).
template <class T, int MI, int NI, int K, bool AT, int SA, bool BT, int SB, class BRows = PaddedRows<SB>>
__device__ __forceinline__ void gemm_ss(float (&acc)[MI][NI][4], unsigned sa, int m0, unsigned sb, int n0,
                                        int lane) {
  static_assert(NI % 2 == 0 && K % 16 == 0, "gemm_ss shape");
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 16) {
    unsigned a[MI][4];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      if constexpr (AT) {
        ld_a_t<SA>(a[mi], sa, m0 + mi * 16, k0, lane);
      } else {
        ld_a<SA>(a[mi], sa, m0 + mi * 16, k0, lane);
      }
    }
#pragma unroll
    for (int nj = 0; nj < NI / 2; ++nj) {
      unsigned b[4];
      if constexpr (BT) {
        ld_b_t<BRows>(b, sb, n0 + nj * 16, k0, lane);
      } else {
        ld_b<BRows>(b, sb, n0 + nj * 16, k0, lane);
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        mma_16816<T>(acc[mi][2 * nj], a[mi], b[0], b[1]);
        mma_16816<T>(acc[mi][2 * nj + 1], a[mi], b[2], b[3]);
      }
    }
  }
}

// acc[MI][NI] += A * B[0..16 KS, n0..) with A already in registers (fragments from acc_to_a).
template <class T, int MI, int NI, int KS, bool BT, int SB, class BRows = PaddedRows<SB>>
__device__ __forceinline__ void gemm_rs(float (&acc)[MI][NI][4], const unsigned (&a)[MI][KS][4], unsigned sb,
                                        int n0, int lane) {
  static_assert(NI % 2 == 0, "gemm_rs shape");
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
#pragma unroll
    for (int nj = 0; nj < NI / 2; ++nj) {
      unsigned b[4];
      if constexpr (BT) {
        ld_b_t<BRows>(b, sb, n0 + nj * 16, ks * 16, lane);
      } else {
        ld_b<BRows>(b, sb, n0 + nj * 16, ks * 16, lane);
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        mma_16816<T>(acc[mi][2 * nj], a[mi][ks], b[0], b[1]);
        mma_16816<T>(acc[mi][2 * nj + 1], a[mi][ks], b[2], b[3]);
      }
    }
  }
}

// The C layout of two adjacent n atoms is the A layout of one 16-deep k step: rounding the fp32
// accumulator to T in place turns S into the A operand of the next GEMM with no data movement.
template <class T, int MI, int NI>
__device__ __forceinline__ void acc_to_a(unsigned (&a)[MI][NI / 2][4], const float (&c)[MI][NI][4]) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int kk = 0; kk < NI / 2; ++kk) {
      a[mi][kk][0] = Num<T>::pack(c[mi][2 * kk][0], c[mi][2 * kk][1]);
      a[mi][kk][1] = Num<T>::pack(c[mi][2 * kk][2], c[mi][2 * kk][3]);
      a[mi][kk][2] = Num<T>::pack(c[mi][2 * kk + 1][0], c[mi][2 * kk + 1][1]);
      a[mi][kk][3] = Num<T>::pack(c[mi][2 * kk + 1][2], c[mi][2 * kk + 1][3]);
    }
  }
}

// Writes acc * mul rounded to T into a [row][col] shared tile at (m0, n0).
template <class T, int STR, int MI, int NI>
__device__ __forceinline__ void store_acc(unsigned base, const float (&c)[MI][NI][4], int m0, int n0, int lane,
                                          float mul) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = m0 + mi * 16 + (lane >> 2) + r * 8, col = n0 + ni * 8 + (lane & 3) * 2;
        sts32(base + (row * STR + col) * 2, Num<T>::pack(c[mi][ni][2 * r] * mul, c[mi][ni][2 * r + 1] * mul));
      }
    }
  }
}

}  // namespace flexattn::kern
