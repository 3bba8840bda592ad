#pragma once
// TMA tiles for the decode ring (FLEXATTN_DECODE_TMA, default on; decode_config.h): contiguous caches only. Why: a
// bulk copy per padded ring row (2 x D + 16 bytes) puts half the rows' shared-memory starts at an odd multiple of 16
// bytes past a 128-byte line, and the copy is cut where its destination crosses a line, mid-way through a 32-byte
// sector of the source, which then crosses the L2 -> SM path twice. ncu, H100, one flushed 8x8k step (s43p.sh): 303 MB
// into L1 / shared memory for 269 MB of K and V (+12.9 %), 2.46 M L2 sector hits and 5.3 M requests, against cuDNN's
// 269 MB, 5 K hits and 2.1 M requests; kernel 100.9 vs 93.9 us. And 128 threads each built and issued a copy per tile.
// Here one thread loads a stage with D / 64 + Dv / 64 boxes of [block_n rows][64 columns] through the host's 4-D
// tensor maps (p.k_map, p.v_map: runtime/decode_tma.h), 128-byte swizzled as the sm90 family's slabs: whole 128-byte
// lines from L2, and ldmatrix reads of 8 rows at one column fall in 8 distinct bank groups. H200, s44b.sh: 8x8k 3142
// -> 3298 GB/s (cuDNN 3362), ncu 2.17 M L2 requests, 43 K hits, 15.4 M instructions (24.3 M before, H100), 74 us.
// (Session 43's other fix, unpadded rows rotated by 32 x (row % 4) and copied in two pieces, fell to 2655 GB/s.)
//
// Rows at or past the tensor's S are zero-filled by the TMA unit; rows in [kv_end, S) are real memory (past a
// sequence's kv_lens, or the next split's rows) and may hold anything, so the tail tile's V rows from kv_end are
// zeroed in shared memory before P V (P is 0 there, and 0 x NaN is not); K rows there are masked by a select.
#include "common/params.h"
#include "decode/decode_config.h"
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)  // the row map alone is host C++ too (test_decode_row_maps_host.cc)
#include "decode/decode_bulk.cuh"
#include "sm90/ptx/tma.cuh"
#endif

namespace flexattn::kern {

// The fragment loads' row map (warp_gemm.cuh's PaddedRows) over a TMA tile: C / 64 slabs of [BN rows][128 bytes],
// chunk k (16 bytes) of row r at chunk k ^ (r % 8) of the row. The tile's base is 1024-byte aligned (the swizzle
// reads address bits 7..9), and may move by whole groups of 8 rows (the decode warps' n0, a multiple of 16).
template <int BN>
struct SwizzledRows {
  static __device__ __forceinline__ unsigned addr(unsigned base, int r, int c) {
    return base + (c >> 6) * (BN * 128) + r * 128 + ((((c >> 3) & 7) ^ (r & 7)) << 4);
  }
};

// The row map over whole-row boxes (FLEXATTN_DECODE_TMA_WHOLE): a tile of C columns is [BN rows][C / 64 pieces] of
// 128-byte lines, line r * (C / 64) + c / 64 for row r, with chunk k of a line at k ^ (line % 8). Whole rows are one
// contiguous block in memory, so a box reads it front to back. At C = 128 the 8 rows of an ldmatrix phase sit on lines
// 2 apart, so 4 bank groups serve them (2-way conflicts): a tile's 32 KiB of fragment reads per ~3 us of its loads on
// an H200 SM, far from the shared-memory limit. Moves by whole groups of 8 rows keep the swizzle phase (n0).
template <int C>
struct WholeRows {
  static __device__ __forceinline__ unsigned addr(unsigned base, int r, int c) {
    const int line = r * (C / 64) + (c >> 6);
    return base + line * 128 + ((((c >> 3) & 7) ^ (line & 7)) << 4);
  }
};

template <bool kWhole, int BN, int C>
struct DecodeTmaLayout {
  using type = SwizzledRows<BN>;
};
template <int BN, int C>
struct DecodeTmaLayout<true, BN, C> {
  using type = WholeRows<C>;
};

// The ring's row map: on the TMA entries SwizzledRows, or WholeRows<C> (C: the operand's columns) with whole-row boxes;
// Other (the padded rows) elsewhere.
template <bool kTma, class Other, int BN, int C>
struct DecodeTmaRows {
  using type = Other;
};
template <class Other, int BN, int C>
struct DecodeTmaRows<true, Other, BN, C> {
  using type = typename DecodeTmaLayout<FLEXATTN_DECODE_TMA_WHOLE != 0, BN, C>::type;
};

// Shared-memory bytes of one TMA stage of K (dim = D) or V (dim = Dv): unpadded, a multiple of 1024 bytes.
FLEXATTN_HD constexpr int decode_tma_stage_bytes(int block_n, int dim) { return block_n * dim * 2; }

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// Thread 0's issue of the tile from kv0 into a stage, in boxes of BOX rows (the maps' box; a multiple of 8, so every
// box starts on a swizzle atom) up to the first that reaches kv_end: the bytes announced on bar (this thread's
// arrival; the barrier counts one), then the boxes. kv0 may be any row (the row-split walks start mid-tile); hk / bk:
// the kv head and batch (0 for a broadcast batch). Rows of the stage past the last box keep an older tile's bytes:
// masked (K) or zeroed (V, decode_tma_zero_tail) like the rows past kv_end.
template <int BN, int BOX, int D, int Dv>
__device__ __forceinline__ void decode_tma_issue(unsigned sk, unsigned sv, unsigned bar, const AttnParams& p, int kv0,
                                                 int kv_end, int hk, int bk) {
  static_assert(BOX % 8 == 0 && BN % BOX == 0, "boxes of whole swizzle atoms tile the stage");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int rows = kv_end - kv0 < BN ? kv_end - kv0 : BN, boxes = (rows + BOX - 1) / BOX;
  decode_mbar_arrive_tx(bar, unsigned(boxes * BOX * 128 * (D / 64 + Dv / 64)));
  // One TMA instruction per box (and 64-column piece), with decode_l2_policy's policy under FLEXATTN_DECODE_EVICT_FIRST.
  auto load = [&](unsigned dst, const TmaDesc* map, int c0, int row, unsigned long long policy) {
    if constexpr (FLEXATTN_DECODE_TMA_WHOLE && FLEXATTN_DECODE_EVICT_FIRST) {
      sm90::tma_load_5d(dst, map, bar, 0, 0, row, hk, bk, policy);
    } else if constexpr (FLEXATTN_DECODE_TMA_WHOLE) {
      sm90::tma_load_5d(dst, map, bar, 0, 0, row, hk, bk);
    } else if constexpr (FLEXATTN_DECODE_EVICT_FIRST) {
      sm90::tma_load_4d(dst, map, bar, c0, row, hk, bk, policy);
    } else {
      sm90::tma_load_4d(dst, map, bar, c0, row, hk, bk);
    }
  };
  const unsigned long long policy = FLEXATTN_DECODE_EVICT_FIRST ? decode_l2_policy(p.kv_read_once != 0) : 0ull;
  for (int i = 0; i < boxes; ++i) {
    if constexpr (FLEXATTN_DECODE_TMA_WHOLE) {  // one box of whole rows each (5-D maps: runtime/decode_tma.h)
      load(sk + i * BOX * D * 2, &p.k_map, 0, kv0 + i * BOX, policy);
      load(sv + i * BOX * Dv * 2, &p.v_map, 0, kv0 + i * BOX, policy);
    } else {
#pragma unroll
      for (int j = 0; j < D / 64; ++j) load(sk + j * BN * 128 + i * BOX * 128, &p.k_map, 64 * j, kv0 + i * BOX, policy);
#pragma unroll
      for (int j = 0; j < Dv / 64; ++j) load(sv + j * BN * 128 + i * BOX * 128, &p.v_map, 64 * j, kv0 + i * BOX, policy);
    }
  }
#endif
}

// The tail tile (kv0 + BN > kv_end): this warp zeroes the V rows it will read, [n0, n0 + rows), from row kv_end - kv0
// on (whole 128-byte lines of every 64-column piece: the swizzle only moves chunks within a line), then orders those generic writes
// before a later TMA into the stage (the barrier that ends the iteration publishes them to that TMA's issuer).
// Warps whose rows overlap (one warp column) write the same zeros.
template <int BN, int Dv>
__device__ __forceinline__ void decode_tma_zero_tail(unsigned sv, int n0, int rows, int first, int lane) {
  const int r0 = first > n0 ? first : n0, r1 = n0 + rows;
  const int n = (r1 - r0) * (Dv / 64) * 8;  // 16-byte chunks
  for (int i = lane; i < n; i += 32) {
    const int row = r0 + i / ((Dv / 64) * 8), slab = (i / 8) % (Dv / 64), chunk = i % 8;
    const int line = FLEXATTN_DECODE_TMA_WHOLE ? row * (Dv / 64) + slab : slab * BN + row;  // WholeRows / SwizzledRows
    decode_zero_16(sv + line * 128 + chunk * 16);
  }
  decode_fence_proxy_async();
  __syncwarp();
}
#endif

}  // namespace flexattn::kern
