#pragma once
// Distance-only biases in the sm90 forward (codegen's kRelDiag: score_mod = score + rel_diag(b, h, q, kv), a
// function of q - kv alone that the affine form does not take: T5's bucketed bias, the relative-bias gather, which
// then leaves its row gathers) with FLEXATTN_SM90_REL_DIAG (the source generator defines it for those variants). The general path evaluates the
// whole mod per entry: T5's bucket (a log2, a clamp, a gather) 64 times per thread and tile, inlined into every
// copy of the softmax, so ptxas alone took 9.3 s of the D=64 forward's 11.9 s compile (locally, NVRTC 13.0; 1.3 s
// with the table). Here a warp's 16 rows x BN columns span BN + 15 distances: its lanes evaluate rel_diag once per
// distance (a rolled loop, ceil((BN + 15) / 32) per lane) into the warp's table in shared memory
// (Sm90FwdSmem::rel), and each thread reads its entries back at compile-time offsets as the rel-gather path reads
// its row (fwd_softmax_sm90.cuh scores_from_rel_row): 34 loads for 64 entries, since row 1 (8 below row 0) at
// column c has row 0's distance at column c - 8.
#include "common/params.h"

namespace flexattn::kern::sm90 {

// Table entry k of a warp's tile holds the bias at distance q - kv = dmin + k, dmin = qs - (kvs + BN - 1) (qs: the
// warp's first row, kvs: the tile's first column, both with their offsets), evaluated at this pair of the tile's
// rectangle. Every entry with that distance has q >= the pair's q and kv >= its kv, so a value any kept entry uses
// (q < L, kv < S) was evaluated at valid positions, where ir::position_dependence's Diagonal makes it that entry's
// own. The rows are the warp's unwrapped ones: a row past L (wrap_index) feeds only rows whose output is dropped.
struct RelDiagPair {
  int q, kv;
};
FLEXATTN_HD constexpr RelDiagPair rel_diag_pair(int k, int bn, int qs, int kvs) {
  return {qs + (k > bn - 1 ? k - (bn - 1) : 0), kvs + (k < bn - 1 ? bn - 1 - k : 0)};
}
// The thread's row 0 (qs + lane / 4) at column kvs + 2t + 8i + (e & 1) has index k0 - 8i - (e & 1), k0 = lane / 4
// - 2t + BN - 1, and row 1 that + 8. A thread reads from entry k0 + 7 - BN (in 0 .. 13) at rel_diag_offset(j, e)
// (>= 0): rel-gather's g[j][e], the bias at k0 + 8 - 8j - e.
FLEXATTN_HD constexpr int rel_diag_from(int lane) { return (lane >> 2) - 2 * (lane & 3) + 6; }
FLEXATTN_HD constexpr int rel_diag_offset(int bn, int j, int e) { return bn + 1 - 8 * j - e; }

}  // namespace flexattn::kern::sm90

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#include "common/variant.cuh"
#include "sm90/ptx/smem.cuh"

namespace flexattn::kern::sm90 {

FLEXATTN_VARIANT_HOOK(RelDiagOf, kRelDiag, bool, false)
template <class V>
__device__ __forceinline__ constexpr bool use_rel_diag() {
#if defined(FLEXATTN_SM90_REL_DIAG)
  return RelDiagOf<V>::value;
#else
  return false;
#endif
}

// A consumer thread's view of its warp's table: the table's shared-memory address, the warp's first row (without
// the offset) and the lane. Unused (zeros) unless use_rel_diag<V>().
struct RelDiagWarp {
  unsigned table = 0;
  int qwarp = 0, lane = 0;
};

// Fills the warp's table for the kv tile at kv0 (after every lane has read the previous tile's) and returns the
// shared-memory address this thread reads its entries from.
template <class V, int BN>
__device__ __forceinline__ unsigned rel_diag_fill(const RelDiagWarp& w, const AttnParams& p, int b, int h, int kv0) {
  const int qs = w.qwarp + p.q_offset, kvs = kv0 + p.kv_offset;
  __syncwarp();
  // A warp-uniform trip count: lanes past the last entry redo it (the same value to the same address). With
  // `k = lane; k < BN + 15` the lanes left the loop apart, and in the rotated kv loop ptxas 13.0 emitted no
  // reconvergence after it (no BSYNC, the peeled loop had one): lanes read the next tile's table before others had
  // written it (H100, session 28: REL_DIAG=1 relbias wrong from 3 kv tiles on, right with the peeled loop).
#pragma unroll 1
  for (int k0 = 0; k0 < BN + 15; k0 += 32) {
    const int k = min(k0 + w.lane, BN + 14);
    const RelDiagPair at = rel_diag_pair(k, BN, qs, kvs);
    st_shared_f32(w.table + 4u * unsigned(k), V::rel_diag(p.mod, b, h, at.q, at.kv));
  }
  __syncwarp();
  return w.table + 4u * unsigned(rel_diag_from(w.lane));
}

// rel_diag_fill for kRelDiag variants; 0 (unused) for the others.
template <class V, int BN>
__device__ __forceinline__ unsigned rel_diag_tile(const RelDiagWarp& w, const AttnParams& p, int b, int h, int kv0) {
  if constexpr (use_rel_diag<V>()) return rel_diag_fill<V, BN>(w, p, b, h, kv0);
  else return 0u;
}

// g[j][e] of the rel-gather form from the warp's table, `from` = rel_diag_fill's address.
template <int BN>
__device__ __forceinline__ void rel_diag_read(float (&g)[BN / 8 + 1][2], unsigned from) {
#pragma unroll
  for (int j = 0; j <= BN / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) g[j][e] = ld_shared_f32(from + 4u * unsigned(rel_diag_offset(BN, j, e)));
  }
}

}  // namespace flexattn::kern::sm90
#endif
