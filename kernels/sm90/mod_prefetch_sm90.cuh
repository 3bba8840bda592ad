#pragma once
// The mods' buffer reads of one (query tile, kv tile) pair into L1, issued by a producer a stage or more
// ahead of the consumers (codegen's V::prefetch: the flat offsets of every load whose index moves with the
// positions, at the tile's four corners; mask_mod's loads only for partial tiles). Compiled in with
// FLEXATTN_SM90_MOD_PREFETCH, which the generated sources of such variants define
// (FLEXATTN_SM90_PREFETCH=0 leaves it out). Without it a gather such as bias[h, q_idx - kv_idx] starts only
// when the consumer has its scores: the relbias forward's SASS issues its 64 LDGs right after the S wait,
// and every tile's softmax then waits an L2 round trip.
#include "common/mod_ops.cuh"
#include "common/params.h"
#include "common/variant.cuh"

namespace flexattn::kern::sm90 {

// Rows [q0, q0 + BM) and columns [kv0, kv0 + BN) of the problem, cut at L and S (the tail tile's wrapped
// columns are not prefetched); `full`: a full tile (mask_mod not evaluated).
template <class V, int BM, int BN>
__device__ __forceinline__ void prefetch_mods(const AttnParams& p, int b, int h, int q0, int kv0, bool full) {
#if defined(FLEXATTN_SM90_MOD_PREFETCH)
  if constexpr (PrefetchOf<V>::value) {
    const int q_hi = min(q0 + BM, p.L) - 1, kv_hi = min(kv0 + BN, p.S) - 1;
    V::prefetch(p.mod, b, h, q0 + p.q_offset, q_hi + p.q_offset, kv0 + p.kv_offset, kv_hi + p.kv_offset, !full);
  }
#endif
}

}  // namespace flexattn::kern::sm90
