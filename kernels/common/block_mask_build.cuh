#pragma once
// BlockMask construction on the GPU from a variant's mask_mod, in torch's layout (include/flexattn/
// block_mask.h), without any dense [q_len, kv_len] array: memory is O(tiles).
//
// Phase 1 (block_mask_classify): one warp per (b, h, q-block, kv-block) tile, grid-stride over tiles.
// It writes the tile's class (0 skipped, 1 partial, 2 full) twice, into a row-major [BH, nq, nkv]
// array and a column-major [BH, nkv, nq] array, so that phase 2 reads both sides contiguously.
// Phase 2 (block_mask_compact): one warp per row of either array writes the count and torch's ordered
// index row (members ascending, then the other ids ascending) for partial and for full blocks.
// Phase 2 does not depend on the mask: it is its own NVRTC program, compiled once per architecture
// (and beside the first classify compile), so a new mask_mod compiles phase 1 only.
//
// Correctness never rests on sampling: a tile is full only after every in-range element was evaluated
// True, skipped only after every one was evaluated False. The only shortcut is that a tile is partial
// as soon as it has shown both values; padding past q_len / kv_len counts as False, so a tail tile whose
// first element is True is partial at once. Most tiles of common masks (all of causal's, except the
// diagonal) are uniform, so their cost is the full q_block * kv_block evaluations; the scan is laid out
// so that one evaluation of a cheap mask costs about one instruction:
//   a lane holds R = 16 query rows in registers (indices clamped to the tile once) and walks kv columns;
//   per column it pays the index math once and evaluates all 16 rows, which the compiler folds into
//   `bad |= (mask != want)` with `want` a template constant (a single ISETP with predicate OR for a
//   comparison mask). Loads a mask makes on q (doc_ids[q]) are loop-invariant and hoisted.
// Compile time against scan speed (H200, bench/lab/round/s16a.sh; S = 131072, block 128, causal /
// document ms; local NVRTC ms of the document classify kernel): 4 kv columns per step 1.48 / 2.29, 260;
// 2 columns 1.58 / 2.41, 195 (the default); one scan copy with a runtime `want` (ISETP.XOR + PLOP3)
// 2.02 / 2.83, 170. At S = 8192 all take 0.017-0.024 ms; the compile is paid by every new mask_mod.
// Lanes past the tile edge evaluate a clamped in-tile element again; a duplicate cannot change whether
// a tile is uniform. Measured on an H200 (bench/lab/block_mask/README.md, 4 columns per step): causal at
// S = 131072, block 128, is 2^34 evaluations in 1.47 ms, 70% of the one-compare-per-evaluation bound.
//
// Entry points are instantiated by generated source, phase 1 next to `struct FlexVariant` (the variant
// contract of common/variant.cuh; only mask_mod is used), phase 2 alone (runtime/block_mask_gpu.cc):
//   extern "C" __global__ void __launch_bounds__(kBmThreads, kBmMinBlocks)
//   flexattn_bm_classify(const __grid_constant__ BlockMaskBuildParams p) { block_mask_classify<FlexVariant>(p); }
//   extern "C" __global__ void __launch_bounds__(kBmThreads)
//   flexattn_bm_compact(const __grid_constant__ BlockMaskBuildParams p) { block_mask_compact(p); }
#include "common/block_mask_params.h"

namespace flexattn::kern {

constexpr int kBmRowsPerLane = 16;
// kv columns per step of bm_tile_uniform (each step evaluates kBmRowsPerLane x this many entries per lane).
#ifndef FLEXATTN_BM_UNROLL
#define FLEXATTN_BM_UNROLL 2
#endif
constexpr int kBmUnroll = FLEXATTN_BM_UNROLL;
constexpr unsigned char kBmSkipped = 0, kBmPartial = 1, kBmFull = 2;

// min(base + off, last) for base + off < 2^32 and last <= INT_MAX: in unsigned, so that the sum cannot
// overflow and the add-and-clamp is one VIADDMNMX.U32.
__device__ __forceinline__ int bm_clamp_to(unsigned base, unsigned off, unsigned last) {
  const unsigned v = base + off;
  return (int)(v < last ? v : last);
}

// True when every element of rows [q0, q1) x columns [k0, k1) evaluates to kWant. The warp's lanes
// form rl_count row lanes x (32 / rl_count) column lanes (rl_count = 1 << rl_log2); rl_count * 16 rows
// are covered per pass. The lane split is a runtime value (one instantiation per kWant keeps NVRTC
// compile time down); it costs one IMAD per column. Two independent `bad` chains per step keep the
// predicate dependency chains short.
template <class V, bool kWant>
__device__ __forceinline__ bool bm_tile_uniform(const ModParams& m, int b, int h, int q0, int q1, int k0, int k1,
                                                int rl_log2, int lane) {
  constexpr int R = kBmRowsPerLane, kUnroll = kBmUnroll;
  const unsigned rl_count = 1u << rl_log2, cl_count = 32u >> rl_log2;
  const unsigned rl = lane & (rl_count - 1u), cl = lane >> rl_log2;
  const int steps = (int)(((long long)k1 - k0 + cl_count - 1) / cl_count);  // the same for every lane
  const unsigned kv_first = (unsigned)k0 + cl, kv_last = (unsigned)k1 - 1u;
  for (long long qp = q0; qp < q1; qp += rl_count * R) {
    int q[R];
#pragma unroll
    for (int i = 0; i < R; ++i) {
      q[i] = bm_clamp_to((unsigned)qp + rl, rl_count * i, (unsigned)q1 - 1u);
      // Indices are never negative: lets the compiler drop the negative-wrap half of the mods'
      // clamped gathers (fa_clamp_index): document mask at S=131072 3.09 -> 2.35 ms (H200).
      __builtin_assume(q[i] >= 0);
    }
    for (int s = 0; s < steps; s += kUnroll) {
      bool bad[2] = {false, false};
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int kv = bm_clamp_to(kv_first, cl_count * (unsigned)(s + u), kv_last);
        __builtin_assume(kv >= 0);
#pragma unroll
        for (int i = 0; i < R; ++i) bad[u & 1] |= V::mask_mod(m, b, h, q[i], kv) != kWant;
      }
      if (__any_sync(0xffffffffu, bad[0] || bad[1])) return false;
    }
  }
  return true;
}

template <class V>
__device__ __forceinline__ void block_mask_classify(const BlockMaskBuildParams& p) {
  const int lane = threadIdx.x % 32;
  const long long warps = (long long)gridDim.x * (kBmThreads / 32);
  for (long long t = (long long)blockIdx.x * (kBmThreads / 32) + threadIdx.x / 32; t < p.num_tiles; t += warps) {
    const int ki = (int)(t % p.nkv);
    const long long row = t / p.nkv;  // (b * H + h) * nq + qi
    const int qi = (int)(row % p.nq);
    const int bh = (int)(row / p.nq);
    const int b = bh / p.H, h = bh % p.H;
    const long long q0l = (long long)qi * p.q_block, k0l = (long long)ki * p.kv_block;
    const int q0 = (int)q0l, k0 = (int)k0l;
    const int q1 = (int)(q0l + p.q_block < p.q_len ? q0l + p.q_block : p.q_len);
    const int k1 = (int)(k0l + p.kv_block < p.kv_len ? k0l + p.kv_block : p.kv_len);
    const bool padded = q0l + p.q_block > p.q_len || k0l + p.kv_block > p.kv_len;
    const bool first = V::mask_mod(p.mod, b, h, q0, k0);
    // Fewer row lanes for short query blocks, so that few lanes evaluate duplicate rows.
    const int rl_log2 = p.q_block > 64 ? 3 : p.q_block > 32 ? 2 : p.q_block > 16 ? 1 : 0;
    unsigned char cls;
    if (first) {
      // Padding is False: a True beside it makes the tile partial without further evaluation.
      cls = padded || !bm_tile_uniform<V, true>(p.mod, b, h, q0, q1, k0, k1, rl_log2, lane) ? kBmPartial : kBmFull;
    } else {
      cls = bm_tile_uniform<V, false>(p.mod, b, h, q0, q1, k0, k1, rl_log2, lane) ? kBmSkipped : kBmPartial;
    }
    if (lane == 0) {
      p.cls_rows[t] = cls;
      p.cls_cols[((long long)bh * p.nkv + ki) * p.nq + qi] = cls;
    }
  }
}

// One ordered row: num[0] = members, idx[0, n) = member ids ascending, then the others ascending.
// Executed by a whole warp; cls[0, n) are the row's tile classes. Positions are long long so that a
// row of up to 2^31-1 blocks cannot overflow the loop.
__device__ __forceinline__ void bm_compact_row(const unsigned char* cls, int n, int* num_p, int* idx_p, int* num_f,
                                               int* idx_f, int lane) {
  const unsigned lt = (1u << lane) - 1u;
  int total_p = 0, total_f = 0;
  // Not unrolled: a row is nkv / 32 steps (4 at S = 16384), and unrolled copies only cost compile time.
#pragma unroll 1
  for (long long j0 = 0; j0 < n; j0 += 32) {
    const long long j = j0 + lane;
    const unsigned char c = j < n ? cls[j] : kBmSkipped;
    total_p += __popc(__ballot_sync(0xffffffffu, c == kBmPartial));
    total_f += __popc(__ballot_sync(0xffffffffu, c == kBmFull));
  }
  long long before_p = 0, before_f = 0;  // members among ids < j0
#pragma unroll 1
  for (long long j0 = 0; j0 < n; j0 += 32) {
    const long long j = j0 + lane;
    const unsigned char c = j < n ? cls[j] : kBmSkipped;
    const unsigned bp = __ballot_sync(0xffffffffu, c == kBmPartial);
    const unsigned bf = __ballot_sync(0xffffffffu, c == kBmFull);
    if (j < n) {
      const long long mp = before_p + __popc(bp & lt), mf = before_f + __popc(bf & lt);
      idx_p[c == kBmPartial ? mp : total_p + j - mp] = (int)j;
      idx_f[c == kBmFull ? mf : total_f + j - mf] = (int)j;
    }
    before_p += __popc(bp);
    before_f += __popc(bf);
  }
  if (lane == 0) {
    *num_p = total_p;
    *num_f = total_f;
  }
}

__device__ __forceinline__ void block_mask_compact(const BlockMaskBuildParams& p) {
  const int lane = threadIdx.x % 32;
  const long long bh = (long long)p.B * p.H;
  const long long kv_rows = bh * p.nq, rows = kv_rows + bh * p.nkv;
  const long long warps = (long long)gridDim.x * (kBmThreads / 32);
  for (long long r = (long long)blockIdx.x * (kBmThreads / 32) + threadIdx.x / 32; r < rows; r += warps) {
    // One call site for both sides (two inlined copies doubled the kernel's NVRTC time).
    const bool kv_side = r < kv_rows;
    const long long c = kv_side ? r : r - kv_rows;
    const int n = kv_side ? p.nkv : p.nq;
    const long long o = c * n;
    bm_compact_row((kv_side ? p.cls_rows : p.cls_cols) + o, n, (kv_side ? p.kv_num_blocks : p.q_num_blocks) + c,
                   (kv_side ? p.kv_indices : p.q_indices) + o,
                   (kv_side ? p.full_kv_num_blocks : p.full_q_num_blocks) + c,
                   (kv_side ? p.full_kv_indices : p.full_q_indices) + o, lane);
  }
}

}  // namespace flexattn::kern
