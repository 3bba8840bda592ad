#pragma once
// Cooperative tile moves between global memory (16-bit elements, rows `row_stride` elements apart,
// 16-byte aligned) and padded shared tiles. Rows at or past valid_rows are zero-filled on load and
// skipped on store, so a tile straddling the end of a sequence never touches memory out of bounds.
#include "sm80/ptx/cp_async.cuh"
#include "sm80/ptx/smem.cuh"

namespace flexattn::kern {

template <int ROWS, int COLS, int STR, int NT>
__device__ __forceinline__ void load_tile_async(unsigned dst, const unsigned char* src, long long row_stride,
                                                int valid_rows, int tid) {
  constexpr int kChunksPerRow = COLS / 8, kTotal = ROWS * kChunksPerRow;
#pragma unroll
  for (int it = 0; it < (kTotal + NT - 1) / NT; ++it) {
    const int i = tid + it * NT;
    if (kTotal % NT == 0 || i < kTotal) {
      const int r = i / kChunksPerRow, c = i % kChunksPerRow;
      const bool ok = r < valid_rows;
      const unsigned char* g = ok ? src + (r * row_stride + c * 8) * 2 : src;
      cp_async_16(dst + (r * STR + c * 8) * 2, g, ok);
    }
  }
}

template <int ROWS, int COLS, int STR, int NT>
__device__ __forceinline__ void store_tile(unsigned char* dst, long long row_stride, int valid_rows, unsigned src,
                                           int tid) {
  constexpr int kChunksPerRow = COLS / 8, kTotal = ROWS * kChunksPerRow;
#pragma unroll
  for (int it = 0; it < (kTotal + NT - 1) / NT; ++it) {
    const int i = tid + it * NT;
    if (kTotal % NT == 0 || i < kTotal) {
      const int r = i / kChunksPerRow, c = i % kChunksPerRow;
      if (r < valid_rows) {
        *reinterpret_cast<uint4*>(dst + (r * row_stride + c * 8) * 2) = lds128(src + (r * STR + c * 8) * 2);
      }
    }
  }
}

// Per-row fp32 vector (lse, delta) into shared memory; rows past valid_rows read as 0.
template <int ROWS, int NT>
__device__ __forceinline__ void load_row_f32_async(unsigned dst, const float* src, int valid_rows, int tid) {
#pragma unroll
  for (int it = 0; it < (ROWS + NT - 1) / NT; ++it) {
    const int i = tid + it * NT;
    if (ROWS % NT == 0 || i < ROWS) {
      const bool ok = i < valid_rows;
      cp_async_4(dst + i * 4, ok ? src + i : src, ok);
    }
  }
}

}  // namespace flexattn::kern
