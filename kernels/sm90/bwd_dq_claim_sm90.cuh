#pragma once
// First-store dQ tiles (FLEXATTN_SM90_BWD_DQ_CLAIM; p.dq_claim, params.h): the preprocess leaves dq_accum
// uncleared, and the first dQ writer to reach a query tile stores its partial there instead of adding it.
// Why: clearing the fp32 accumulator is half of the preprocess's DRAM traffic (B=2 H=16 S=8192 D=128: 134 of
// 268 MB), about 4 % of a sliding-window or document backward (session 30).
// Protocol per (b, h, 64-row query tile) word: 0 untouched, 1 claimed (its stores in flight), 2 stored. A writer
// that wins 0 -> 1 stores, waits until the stores have completed in global memory and releases 2; every other
// writer waits (acquire) for 2 before its reductions. The claimant waits on nothing while it holds the claim, so
// a waiter cannot wait forever, whatever the launch or arrival order. In deterministic mode the ordered
// reductions (bwd_dq_order_sm90.cuh) make rank 0 the claimant: 0 + x == x, so the sums are the same as with a
// cleared accumulator (up to the sign of a zero), and still reproducible. The dQ convert writes zeros for tiles
// no writer reached (rows without contributions). Tiles with many writers are not claimed (bwd_dq_claim_rule_sm90.h):
// the preprocess clears them and starts their word at 2.
#include "common/params.h"
#include "sm90/bwd_dq_claim_rule_sm90.h"
#include "sm90/bwd_dq_order_sm90.h"
#include "sm90/ptx/gpu_sync.cuh"

namespace flexattn::kern::sm90 {

// Lane 0, before the tile's reductions: true when this writer claimed query tile (bh = b * Hq + h, q0) and so
// stores it; false once the claimant has stored it (acquired, and fenced for the reductions that follow).
__device__ __forceinline__ bool bwd_dq_claim(const AttnParams& p, int bh, int q0) {
  int* word = p.dq_claim + bwd_dq_semaphore_index(p.L, bh, q0);
  int seen = ld_acquire_gpu_s32(word);
  if (seen == kDqClaimOpen && atomicCAS(word, kDqClaimOpen, 1) == kDqClaimOpen) return true;
  if (seen != kDqClaimStored) {
    // A claimant stores within microseconds; a word still not 2 after seconds was never zeroed (a path that skipped
    // the preprocess): a launch error (illegal instruction) rather than a hang.
    const unsigned long long t0 = global_timer_ns();
    while ((seen = ld_acquire_gpu_s32(word)) != kDqClaimStored)
      if (global_timer_ns() - t0 > kDqOrderTimeoutNs) __trap();
  }
  fence_proxy_async_global();
  return false;
}

// Lane 0 of the claimant, after committing the tile's stores: waits until they have completed in global memory,
// then marks the tile stored (1 -> 2, release).
__device__ __forceinline__ void bwd_dq_mark_stored(const AttnParams& p, int bh, int q0) {
  release_after_bulk_writes(p.dq_claim + bwd_dq_semaphore_index(p.L, bh, q0));
}

}  // namespace flexattn::kern::sm90
