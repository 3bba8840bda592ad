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
#include "sm80/warp_gemm.cuh"

namespace flexattn::kern {

// Where byte `byte` of row r of a rotated tile with rows of rb bytes sits, from the tile's start; the copies
// (decode_bulk_row) and the fragment loads (RotatedRows) both go through it.
FLEXATTN_HD_INLINE constexpr int decode_rot_offset(int r, int byte, int rb) { return r * rb + ((byte + 32 * (r & 3)) & (rb - 1)); }

// The fragment loads' row map (warp_gemm.cuh's PaddedRows for padded rows) over rows of RB bytes. A row tile's base
// may move by whole groups of 4 rows (the decode warps' n0, a multiple of 16) without changing the rotation.
template <int RB>
struct RotatedRows {
  static_assert(RB >= 128 && (RB & (RB - 1)) == 0, "rotated rows: a power-of-two row of at least 128 bytes");
  static __device__ __forceinline__ unsigned addr(unsigned base, int r, int c) { return base + decode_rot_offset(r, 2 * c, RB); }
};

// The ring's rows for a K or V tile of `dim` columns: rotated (kRot) or padded to stride elements.
template <bool kRot, int dim, int stride>
struct DecodeRows {
  using type = PaddedRows<stride>;
};
template <int dim, int stride>
struct DecodeRows<true, dim, stride> {
  using type = RotatedRows<2 * dim>;
};

}  // namespace flexattn::kern
