#pragma once
// Ordered dQ reductions of the deterministic sm90 backward (docs/kernels_sm90.md, "Deterministic dQ"):
// the rank of a kv tile among the kv tiles that add into one query tile. Plain host / device code (the
// host tests check it against the transposed walk the kernel runs).
//
// Query tile (b, h, q0) receives one dQ partial from every 128-row kv tile whose backward walk visits it:
// the kv tiles of the kv blocks listed (partial and full lists) in the block-mask row of q0, or every kv
// tile without a block mask. They add in descending kv-tile order: kv tile j goes after every
// contributor above it, so its rank is the number of those. Descending, because a causal CTA j reaches
// query tile i after i - j steps of its walk: the higher tiles get there first, and the order follows the
// arrivals. The kernel launches kv tiles in descending order too (rank 0 = the last kv tile; per (kv head,
// kv batch) the ranks ascend with the linear block index in every launch order of sm90_bwd_grid_tile): a
// CTA only waits for CTAs launched before it, so the oldest unfinished CTA never waits (no deadlock while
// CTAs are dispatched in blockIdx order, which FA3's deterministic backward relies on as well).
#include "common/params.h"
#include "sm90/tile_config_sm90_bwd.h"

namespace flexattn::kern::sm90 {

// kv tiles above tile j among those of kv block kb (kv_block a multiple of kSm90BwdBlockN, rows < S;
// nkv the mask's block columns, so kb * kv_block < S + kv_block stays in int).
FLEXATTN_HD inline int bwd_dq_tiles_above(int kb, int kv_block, int S, int nkv, int j) {
  if (kb < 0 || kb >= nkv) return 0;
  const int s0 = kb * kv_block;
  if (s0 >= S) return 0;
  const int s1 = S - s0 < kv_block ? S : s0 + kv_block;
  const int t0 = s0 / kSm90BwdBlockN, t1 = (s1 - 1) / kSm90BwdBlockN + 1;
  const int lo = t0 > j + 1 ? t0 : j + 1;
  return t1 > lo ? t1 - lo : 0;
}

// The block-mask list row of query tile (b, h, q0) (mask_list_row), kDqNoMaskRow without a block mask (every
// kv tile contributes), or -1 when the tile lies past the mask's rows (no contributors).
constexpr int kDqNoMaskRow = -2;
FLEXATTN_HD inline int bwd_dq_mask_row(const AttnParams& p, int b, int h, int q0) {
  if (p.kv_num_blocks == nullptr) return kDqNoMaskRow;
  const int mrow = q0 / (p.q_block > 0 ? p.q_block : 1);
  if (mrow >= p.nq || p.kv_indices == nullptr) return -1;
  const int mb = p.mask_B > 0 ? p.mask_B : 1, mh = p.mask_H > 0 ? p.mask_H : 1;
  return ((b % mb) * mh + (h % mh)) * p.nq + mrow;  // the list rows fit in int
}

// Whether the block mask has full lists, and the partial / full kv-block counts of list row `row` (>= 0), clamped to
// [0, nkv]; both counts are loaded together.
FLEXATTN_HD inline bool bwd_dq_row_counts(const AttnParams& p, int row, int& c0, int& c1) {
  const bool two = p.full_kv_num_blocks != nullptr && p.full_kv_indices != nullptr;
  c0 = p.kv_num_blocks[row], c1 = two ? p.full_kv_num_blocks[row] : 0;
  c0 = c0 < 0 ? 0 : (c0 > p.nkv ? p.nkv : c0);
  c1 = c1 < 0 ? 0 : (c1 > p.nkv ? p.nkv : c1);
  return two;
}

// One lane's share of the rank of kv tile j at list row `row` (bwd_dq_mask_row): entries first, first + step,
// ... of both lists; the caller sums the shares (a warp: first = lane, step = 32). Both lists' counts, and
// then one entry of each, are loaded together: the dQ writer's critical path per query tile is this
// function's chain of dependent loads (session 8, H200: causal deterministic backward +55 % with one list
// after the other, +41 % together).
FLEXATTN_HD inline int bwd_dq_rank_in_row(const AttnParams& p, int row, int j, int first, int step) {
  if (row == kDqNoMaskRow) return first == 0 ? (p.S + kSm90BwdBlockN - 1) / kSm90BwdBlockN - 1 - j : 0;
  if (row < 0) return 0;
  int c0, c1;
  const bool two = bwd_dq_row_counts(p, row, c0, c1);
  const long long at = (long long)row * p.nkv;
  const int* r0 = p.kv_indices + at;
  const int* r1 = two ? p.full_kv_indices + at : r0;
  int n = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll 1  // unrolled, the loads in flight spilled the writer warp (24 registers with the v2 kernel)
#endif
  for (int i = first; i < (c0 > c1 ? c0 : c1); i += step) {
    const int k0 = i < c0 ? r0[i] : -1, k1 = i < c1 ? r1[i] : -1;
    n += bwd_dq_tiles_above(k0, p.kv_block, p.S, p.nkv, j) + bwd_dq_tiles_above(k1, p.kv_block, p.S, p.nkv, j);
  }
  return n;
}

// The same for query tile (b, h, q0).
FLEXATTN_HD inline int bwd_dq_rank_part(const AttnParams& p, int b, int h, int q0, int j, int first, int step) {
  return bwd_dq_rank_in_row(p, bwd_dq_mask_row(p, b, h, q0), j, first, step);
}

// A wait longer than this gives up the order for the rest of the launch (the abandon word; reported under
// FLEXATTN_JIT_DEBUG=1): only block lists that are not each other's transpose, or that repeat an entry, can
// make a contributor never arrive (the kernel walks the transposed lists, the rank counts the kv lists).
// Legitimate waits are one CTA's walk at most (milliseconds; ~100x that under compute-sanitizer).
constexpr unsigned long long kDqOrderTimeoutNs = 5000000000ull;

// Semaphores: one int per (b, h, 64-row query tile), then one word that, once set, abandons the order
// (a wait that timed out: block lists whose transposed lists are not their transpose). Zeroed by the
// backward's preprocess kernel.
FLEXATTN_HD inline long long bwd_dq_semaphores(int B, int Hq, int L) {
  return (long long)B * Hq * ((L + kSm90BwdBlockM - 1) / kSm90BwdBlockM) + 1;
}

// Index of the semaphore of query tile (bh = b * Hq + h, q0); the abandon word is bwd_dq_semaphores - 1.
FLEXATTN_HD inline long long bwd_dq_semaphore_index(int L, int bh, int q0) {
  return (long long)bh * ((L + kSm90BwdBlockM - 1) / kSm90BwdBlockM) + q0 / kSm90BwdBlockM;
}

}  // namespace flexattn::kern::sm90
