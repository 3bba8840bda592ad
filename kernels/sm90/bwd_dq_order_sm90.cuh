#pragma once
// Ordered dQ reductions (deterministic mode of the sm90 backward; bwd_dq_order_sm90.h has the order and
// why it cannot deadlock). A dQ writer warp of kv tile j (two in deterministic mode, alternating query tiles;
// bwd_dq_writer), per query tile: bwd_dq_wait_turn before its
// reductions, bwd_dq_pass_turn once they have completed. Every partial of a query tile is then added in
// one fixed order, and dq_accum is bitwise reproducible.
#include "common/params.h"
#include "sm90/bwd_dq_order_sm90.h"
#include "sm90/ptx/gpu_sync.cuh"
#include "sm90/ptx/mbarrier.cuh"

namespace flexattn::kern::sm90 {


// Semaphore of query tile (bh = b * Hq + h, q0).
__device__ __forceinline__ int* bwd_dq_semaphore(const AttnParams& p, int bh, int q0) {
  return p.dq_sem + bwd_dq_semaphore_index(p.L, bh, q0);
}

// Lane 0, after issuing and committing the tile's reductions (and releasing the shared buffer): waits
// until they have completed in global memory, then hands the query tile to the next kv tile.
__device__ __forceinline__ void bwd_dq_pass_turn(const AttnParams& p, int bh, int q0) {
  release_after_bulk_writes(bwd_dq_semaphore(p, bh, q0));
}

// Ordered mode: dQ is added in a fixed order (deterministic, with p.dq_sem, which the host sets for the bulk
// dQ paths of the non-persistent kernel only).
template <bool kDqBulk, bool kPersistent>
__device__ __forceinline__ bool bwd_dq_ordered(const AttnParams& p) {
  if constexpr (kDqBulk && !kPersistent) return p.deterministic != 0 && p.dq_sem != nullptr;
  return false;
}

// dQ writer warps (bwd_dq_writer), and so end markers the consumers post: two in ordered mode (alternating query
// tiles), else one.
__device__ __forceinline__ constexpr int bwd_dq_writer_count(bool ordered) { return ordered ? 2 : 1; }

// Whether this kernel adds dQ into dq_accum: always outside deterministic mode; in deterministic mode only
// with the ordered reductions; otherwise the sm80 dQ pass computes dQ.
// (Spelled out rather than through bwd_dq_ordered: that form, the same logic, cost the t5 + causal consumers
// a 4-byte spill, nvcc 13.0.)
template <bool kDqBulk, bool kPersistent>
__device__ __forceinline__ bool bwd_adds_dq(const AttnParams& p) {
  if (p.dq_accum == nullptr) return false;
  if constexpr (kDqBulk && !kPersistent) return p.deterministic == 0 || p.dq_sem != nullptr;
  return p.deterministic == 0;
}

// The writer's last rank and its list row: the rank depends on the row only (and the CTA's kv tile), and
// consecutive query tiles mostly share one (a 128-row mask block holds two 64-row query tiles; the heads
// of a GQA group and broadcast masks share rows), so most tiles skip the list reads.
// Two entries: the row in use, and the row the writer warmed while the consumers computed the next tile
// (bwd_dq_warm_rank). A rank read on the writer's critical path (dq_full -> rank -> acquire -> reductions -> read ->
// dq_empty) held the consumers' single dQ buffer at D = 128: session 18 measured causal D=128 deterministic +47 %
// with the rank and +7 % without it (acquire wait off in both).
struct DqRankCache {
  int row = -3, rank = 0;
  int next_row = -3, next_rank = 0;
};

// The list row of query tile (bh = b * Hq + h, q0) (bwd_dq_mask_row).
__device__ __forceinline__ int bwd_dq_row_of(const AttnParams& p, int bh, int q0) {
  const int b = bh / p.Hq;
  return bwd_dq_mask_row(p, b, bh - b * p.Hq, q0);
}

// Whole warp: kv tile j's rank at list row `row`, read from the lists (the lanes' shares summed).
__device__ __forceinline__ int bwd_dq_rank_of_row(const AttnParams& p, int row, int j, int lane) {
  return int(__reduce_add_sync(0xffffffffu, unsigned(bwd_dq_rank_in_row(p, row, j, lane, 32))));
}

// Whole warp: the rank of kv tile j at list row `row`, from the cache (either entry) or the lists.
__device__ __forceinline__ int bwd_dq_cached_rank(const AttnParams& p, int row, int j, int lane, DqRankCache& cache) {
  if (row != cache.row) {
    cache.rank = row == cache.next_row ? cache.next_rank : bwd_dq_rank_of_row(p, row, j, lane);
    cache.row = row;
  }
  return cache.rank;
}

// Whole warp, between tiles: computes the rank of query tile (bh, q0_next) ahead of its dq_full (the walks visit a
// block's query tiles in ascending order, and mostly the next block row after it), unless cached.
__device__ __forceinline__ void bwd_dq_warm_rank(const AttnParams& p, int bh, int q0_next, int j, int lane,
                                                 DqRankCache& cache) {
  const int row = bwd_dq_row_of(p, bh, q0_next);
  if (row == cache.row || row == cache.next_row) return;
  cache.next_rank = bwd_dq_rank_of_row(p, row, j, lane);
  cache.next_row = row;
}

// Whole warp; returns once lane 0 has seen the semaphore of query tile (bh, q0) reach `rank` (acquire), or the order
// was abandoned.
__device__ __forceinline__ void bwd_dq_wait_rank(const AttnParams& p, int bh, int q0, int rank, int lane) {
  if (lane == 0 && rank > 0) {
    const int* sem = bwd_dq_semaphore(p, bh, q0);
    if (ld_acquire_gpu_s32(sem) < rank) {
      int* abandon = p.dq_sem + bwd_dq_semaphores(p.B, p.Hq, p.L) - 1;
      const unsigned long long t0 = global_timer_ns();
      while (ld_acquire_gpu_s32(sem) < rank) {
        if (ld_relaxed_gpu_s32(abandon) != 0) break;
        if (global_timer_ns() - t0 > kDqOrderTimeoutNs) {
          st_relaxed_gpu_s32(abandon, 1);
          break;
        }
      }
    }
    fence_proxy_async_global();  // the reductions that follow come after the acquire
  }
  __syncwarp();
}

// Whole warp (the rank is summed over the lanes): bwd_dq_wait_rank with kv tile j's rank at query tile (bh, q0).
__device__ __forceinline__ void bwd_dq_wait_turn(const AttnParams& p, int bh, int q0, int j, int lane,
                                                 DqRankCache& cache) {
  bwd_dq_wait_rank(p, bh, q0, bwd_dq_cached_rank(p, bwd_dq_row_of(p, bh, q0), j, lane, cache), lane);
}

// Whole warp, before waiting for dq_full at (full, parity): polls the turn of the query tile the writer expects next
// (bh, q0: its previous tile's head, q0 + writers * 64, i.e. the walk going on), until the turn came or dq_full did.
// True when the turn came (acquired, and fenced for the reductions as bwd_dq_wait_turn does); the writer then skips
// bwd_dq_wait_turn if the tile is the expected one. Why: session 19's SASS samples (causal D=128) had the consumers'
// dq_empty wait at 6.5 % of all samples in deterministic mode (0.9 % otherwise), and the acquire loop ran ~8 polls
// per turn: the turns are mostly not there yet at dq_full. Waiting for them while the consumers compute the tile
// hides up to a step of it. A wrong guess costs nothing but polls: dq_full ends the loop.
// Measured (H200, B=2 H=16 S=8192, deterministic cost over the default backward, GPU time): the first kernel (D = 64,
// two dQ buffers) causal +16.3 -> +10.0 %, full +9.0 -> +4.2 %, document +24.0 -> +21.1 %; the v2 kernel (D = 128)
// lost while it had one buffer, causal +21 -> +53 %, unchanged by a backoff between polls, so the writer uses it only
// with two buffers (bwd_dq_writer), which v2 has since session 20 (with them: causal D = 128 +22.7 -> +17.3 %).
__device__ __forceinline__ bool bwd_dq_early_rank(const AttnParams& p, unsigned full, unsigned parity, int bh, int q0,
                                                  int rank, int lane) {
  bool got = false;
  if (lane == 0) {
    const int* sem = bwd_dq_semaphore(p, bh, q0);
    while (true) {
      if (rank <= 0 || ld_acquire_gpu_s32(sem) >= rank) {
        got = true;
        break;
      }
      if (mbar_test_wait(full, parity)) break;
    }
    if (got) fence_proxy_async_global();
  }
  return __shfl_sync(0xffffffffu, int(got), 0) != 0;
}

// The same with kv tile j's rank at (bh, q0) from the cache or the lists.
__device__ __forceinline__ bool bwd_dq_early_turn(const AttnParams& p, unsigned full, unsigned parity, int bh, int q0,
                                                  int j, int lane, DqRankCache& cache) {
  return bwd_dq_early_rank(p, full, parity, bh, q0, bwd_dq_cached_rank(p, bwd_dq_row_of(p, bh, q0), j, lane, cache),
                           lane);
}

}  // namespace flexattn::kern::sm90
