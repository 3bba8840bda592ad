#pragma once
// The non-persistent sm90 backward's deferred launch order (FLEXATTN_SM90_BWD_CTA_ORDER, default on; p.bwd_cta_order):
// launch position k runs natural grouped index order[k] (sm90_bwd_grid_tile), where the order keeps the natural
// one but moves the CTAs whose walk is shorter than kBwdDeferFraction of the mean walk to the end (both parts in
// their natural order).
//
// Why: a CTA's time follows its walk (the query tiles its kv tile's mask column lists, over the query heads and
// batches it serves). Document masks give walks of 2 .. 46 query tiles in no monotone order, so the grouped order
// (kv tiles ascending, longest first only for causal-like masks) ends its launch with long CTAs running alone:
// bench/lab/s34/bwd_tail_model.py, B=2 H=16 S=8192, 132 SMs, groups of 2 heads: makespan 337 steps against a
// bound of 311, and 318-320 with the short CTAs deferred (causal and sliding windows gain nothing there; causal
// loses ~1 %, so the host asks for the order only where the walks are not already non-increasing: the flag).
//
// bwd_cta_order_build (one CTA of kBwdOrderThreads, launched before the main kernel) computes each walk once into
// the workspace after the order (2 n ints in all), then the mean, the flag and the partition. The order is a
// permutation of 0 .. n - 1 whatever the mask (the partition is stable and total), so a stale or odd mask can only
// change the schedule. With every walk non-increasing along each (kv head, kv batch) pair's kv tiles (the grouped
// order is longest first already) it writes the identity.
#include "common/mask_iter.cuh"
#include "common/params.h"
#include "sm90/tile_config_sm90_bwd.h"

namespace flexattn::kern::sm90 {

constexpr int kBwdOrderThreads = kSm90BwdOrderThreads;
// bwd_order_scan's warp totals: scratch[lane] for every lane of warp 0, so exactly 32 warps write them.
static_assert(kBwdOrderThreads == 1024, "the order's scan reads 32 warp totals");
constexpr float kBwdDeferFraction = 0.25f;  // bwd_tail_model.py: 0.25 and 0.5 of the mean model alike

// The walk of natural launch index i of n_kv kv tiles per pair (default mode: kv tile = rank), in 64-row query tiles:
// the blocks of its mask column over the query heads of its kv head and the batches it serves (BwdTileIter),
// block_q / 64 tiles each (the last block's clipping at L is ignored: an estimate for the order only).
FLEXATTN_HD_INLINE long long bwd_cta_walk(const AttnParams& p, int i, int n_kv) {
  const Sm90BwdGridTile t = sm90_bwd_grid_tile(i, n_kv, p.Hkv, p.Bkv, p.bwd_head_group);
  if (p.q_num_blocks == nullptr || p.kv_block <= 0) return 0;
  const long long col = (long long)t.rank * kSm90BwdBlockN / p.kv_block;
  if (col >= p.nkv) return 0;
  const int G = p.Hq / p.Hkv, b0 = p.Bkv == 1 ? 0 : t.bz, b1 = p.Bkv == 1 ? p.B : t.bz + 1;
  long long blocks = 0;
  for (int b = b0; b < b1; ++b)
    for (int g = 0; g < G; ++g) {
      const long long r = mask_list_row(p, b, t.hk * G + g, col, p.nkv);
      blocks += p.q_num_blocks[r] + (p.full_q_num_blocks ? p.full_q_num_blocks[r] : 0);
    }
  return blocks * (p.q_block / kSm90BwdBlockM > 0 ? p.q_block / kSm90BwdBlockM : 1);
}

// The natural index of the same pair's next kv tile (rank + 1: i plus its group's size), or -1 after its last.
FLEXATTN_HD_INLINE int bwd_cta_next_kv(const AttnParams& p, int i, int n_kv) {
  const int hb = p.Hkv * p.Bkv;
  const HeadGroupSpan s = head_group_span(i, hb, sm90_bwd_group_size(p.bwd_head_group, hb), n_kv);
  return s.within / s.size + 1 < n_kv ? i + s.size : -1;
}

// The order as one thread computes it (host tests; the kernel's parallel form must give the same).
FLEXATTN_HD_INLINE void bwd_cta_order_reference(const AttnParams& p, int n_kv, int* order) {
  const int n = n_kv * p.Hkv * p.Bkv;
  long long sum = 0;
  bool rises = false;
  for (int i = 0; i < n; ++i) {
    const int next = bwd_cta_next_kv(p, i, n_kv);  // a walk rising along a pair's kv tiles: not longest first
    sum += bwd_cta_walk(p, i, n_kv);
    rises = rises || (next >= 0 && bwd_cta_walk(p, next, n_kv) > bwd_cta_walk(p, i, n_kv));
  }
  // (The kernel keeps the walks as ints: a walk above 2^31 - 1 query tiles is out of reach.)
  const double thr = rises ? kBwdDeferFraction * double(sum) / double(n > 0 ? n : 1) : 0.0;
  int k = 0;
  for (int i = 0; i < n; ++i)
    if (double(bwd_cta_walk(p, i, n_kv)) >= thr) order[k++] = i;
  for (int i = 0; i < n; ++i)
    if (double(bwd_cta_walk(p, i, n_kv)) < thr) order[k++] = i;
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// Exclusive prefix sum over the CTA of one value per thread (kBwdOrderThreads); every thread gets its own and the
// total. scratch: 32 ints of shared memory.
__device__ __forceinline__ int bwd_order_scan(int v, int* scratch, int& total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int x = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) scratch[warp] = x;
  __syncthreads();
  if (warp == 0) {
    int w = scratch[lane];
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += y;
    }
    scratch[lane] = w;  // inclusive over the warps
  }
  __syncthreads();
  total = scratch[31];
  const int before = (warp > 0 ? scratch[warp - 1] : 0) + x - v;
  __syncthreads();  // scratch is reused by the next call
  return before;
}

// The entry's body: p.bwd_cta_order[0, n) (the workspace) <- the deferred order of the main kernel's
// n = n_kv x Hkv x Bkv CTAs; [n, 2 n) holds the walks meanwhile (computed once: a walk is a few dependent loads).
__device__ __forceinline__ void bwd_cta_order_build(const AttnParams& p, int n_kv) {
  // The preprocess, a programmatic dependent of this grid (launch_backward), may start beside it at once.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  __shared__ int scratch[32];
  __shared__ long long part[32];
  int* order = const_cast<int*>(p.bwd_cta_order);
  const int n = n_kv * p.Hkv * p.Bkv, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int* walk = order + n;
  auto block_sum = [&](long long v) {  // every thread gets the CTA's total
#pragma unroll
    for (int o = 16; o >= 1; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    long long t = 0;
    for (int w = 0; w < kBwdOrderThreads / 32; ++w) t += part[w];
    __syncthreads();
    return t;
  };
  long long sum = 0;
  for (int i = threadIdx.x; i < n; i += kBwdOrderThreads) {
    const long long w = bwd_cta_walk(p, i, n_kv);
    walk[i] = int(w < 0x7fffffffLL ? w : 0x7fffffffLL);
    sum += w;
  }
  const long long total = block_sum(sum);  // its barrier also publishes the walks to the CTA
  // The grouped order is longest first already where no pair's walk rises from a kv tile to the next.
  long long rises = 0;
  for (int i = threadIdx.x; i < n; i += kBwdOrderThreads) {
    const int next = bwd_cta_next_kv(p, i, n_kv);
    if (next >= 0 && walk[next] > walk[i]) rises = 1;
  }
  const double thr = block_sum(rises) != 0 ? kBwdDeferFraction * double(total) / double(n > 0 ? n : 1) : 0.0;
  long long longs = 0;
  for (int i = threadIdx.x; i < n; i += kBwdOrderThreads) longs += double(walk[i]) >= thr ? 1 : 0;
  const int n_long = int(block_sum(longs));
  // Long CTAs first, then short ones, each in natural order: chunk by chunk, the long CTAs before each index.
  int long_before = 0;  // long CTAs in the chunks before this one
  for (int c = 0; c < n; c += kBwdOrderThreads) {
    const int i = c + int(threadIdx.x);
    const bool is_long = i < n && double(walk[i]) >= thr;
    int chunk = 0;
    const int rank = bwd_order_scan(is_long ? 1 : 0, scratch, chunk);  // long CTAs before i in this chunk
    if (i < n) order[is_long ? long_before + rank : n_long + (i - long_before - rank)] = i;
    long_before += chunk;
  }
}
#endif

}  // namespace flexattn::kern::sm90
