#pragma once
// Tile scheduler of the persistent sm90 forward: one CTA per SM takes the (query tile, head, batch)
// tiles one after the other, so the producer loads the next tile's Q, K and V while the consumers
// still finish the previous tile (on the H200, one CTA per SM with a per-tile grid left every prologue
// and epilogue exposed: sliding-window and document masks ran at half the dense rate, bench/RESULTS.md).
//
// Order: heads in groups whose K and V fit in about half of the L2, and inside a group the query tiles
// longest first (the last tiles of causal-like masks have the most kv tiles) with the group's heads
// next to each other, so concurrently running CTAs share K/V in L2 and the tail holds the short tiles;
// a smaller last group (hb % group heads) goes first (FwdTileOrder::span).
// Work tile t (an index into that order, FwdTileOrder::at) is handed out by a tile queue: each CTA's
// first tile is t = blockIdx.x; every further one is t = gridDim.x + atomicAdd(queue, 1) (greedy
// longest-first: a CTA that finishes early takes the next longest tile). With a null queue the CTA
// takes t + gridDim.x instead (the static stride, FLEXATTN_SM90_TILE_QUEUE=0 or a launch without a
// queue word): same order, no atomics, but the CTAs that start on the longest tiles keep getting the
// longest of every round (causal 6-15 % behind one CTA per tile at S=2048, bench/RESULTS.md).
//
// Queue word (fwd_queue_next below): one unsigned per launch, 0 before the launch and 0 again after it,
// without a memset or a host sync. Every CTA takes until its take fails (t >= count), so the launch
// performs exactly count atomicAdds (count - gridDim.x that succeed, gridDim.x that fail; all fail
// when gridDim.x >= count) and they return 0 .. count - 1 in some order. The one that returns count - 1
// is the launch's last access to the word: that CTA stores 0 back. The next launch that uses the word
// must be ordered after this one (same stream): runtime/sm90_tile_queue.cc hands each stream its own
// word, so kernels running concurrently on two streams never share one. Two launches sharing a word
// concurrently would split the tiles between them (wrong output), which is why a graph capture gets a
// word of its own (same file).
//
// Handshake of the persistent kernel (attn_fwd_sm90<..., kPersistent = true>; the default kernel,
// one CTA per tile, keeps the end-marker protocol of fwd_producer_sm90.cuh). Use i of a CTA (its i-th
// work tile, or the end marker after the last one) uses Q buffer qb = i % QB (QB = 2 at d <= 128,
// tile_config_sm90.h) for the u = i / QB-th time.
//  1. The producer alone learns the tiles (the queue), so it publishes each one: the tile index t_i
//     and its kv-tile count n_i (fwd_count_kv_tiles: the same sequence TileWalker yields) go into the
//     buffer's slot (kv_count(qb): {n, t}) before its arrival on full_q(qb). Consumers wait on full_q(qb)
//     with parity u & 1, then read {n_i, t_i}; t_i < 0 is the end marker (n = 0, no Q bytes): both
//     warpgroups leave their tile loop. Otherwise both consume exactly n_i ring slots, so the ring
//     carries only kv tiles (no end-marker slot) and its (stage, phase) runs on across tiles in step
//     on both sides. n_i = 0: no Q load (a plain arrival), no ring slot, O = 0, lse = -inf.
//  2. Before writing the slot and loading Q into qb for use u >= 1 (the end marker included), the
//     producer waits on q_free(qb) with parity (u - 1) & 1: every consumer warpgroup's O store of use i - QB has
//     read the buffer (their O was staged in it), and every warpgroup has read {n, t} of use i - QB. Neither
//     barrier can run a phase ahead of its waiter: use u + 1 of qb needs the q_free of use u, which
//     comes after the consumers' wait. The consumers never need t_{i+1} before full_q of use i + 1, so
//     learning the tiles late changes no parity: the sequence of uses per buffer is the one the
//     static order gave, with one more use (the end marker) at the end.
//  3. With QB = 2 the producer loads Q_{i+1} as soon as tile i's last K/V is issued; the q_free it
//     waits for is tile i-1's, so tile i's epilogue never holds back tile i+1's Q or K/V. With QB = 1
//     it issues tile i+1's first K/V before waiting for tile i's epilogue (q_free), as the default does.
//     The producer takes t_{i+1} from the queue once tile i's last K/V is issued, i.e. about `stages`
//     kv tiles before the consumers finish tile i: late enough that the claim order is the greedy one
//     (claiming at the start of tile i, one tile ahead, cost causal 11 % of makespan in the schedule
//     model of tests/compile/sm90/test_sm90_host.cc), early enough that the atomic's round trip to L2,
//     the count and Q_{i+1} fit in the ring's lead.
//  4. Ping-pong (fwd_consumer_sm90.cuh, Turns): one token for the CTA's life. The last consumer warpgroup
//     grants it once before the first tile, warpgroup 0 takes the last grant after the end marker; in between
//     each warpgroup takes and gives it n_i + 1 times per tile, in turn (round robin over 2, or 3 with the tall
//     tile), so exactly one grant is pending at any time and it sits on warpgroup 0's barrier at every tile
//     change. (Per-tile start / finish would let the last warpgroup grant tile i+1's first turn, now that its Q
//     no longer waits for tile i's epilogues, while warpgroup 0 has yet to take tile i's last grant: two grants
//     on one barrier.)
#include "common/params.h"
#include "sm90/head_groups_sm90.h"
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#include "sm90/ptx/redux.cuh"
#endif

namespace flexattn::kern::sm90 {

struct FwdTile {
  int q0, h, b;  // first query row, query head, batch
};

#if defined(FLEXATTN_SM90_SMALL_GROUP_LAST)  // FLEXATTN_SM90_SMALL_GROUP_FIRST=0 (kernel_source_sm90.cc)
constexpr bool kFwdSmallGroupFirst = false;
#else
constexpr bool kFwdSmallGroupFirst = true;
#endif

struct FwdTileOrder {
  int nq, Hq, hb, group, count;  // query tiles, heads, heads x batches, heads per group, tiles

  // Heads-and-batches in head groups, a smaller leftover group first (head_groups_sm90.h; bench/run.py's
  // document mask 145.5 -> 138.0 in the schedule model). kSmallFirst = false
  // (FLEXATTN_SM90_SMALL_GROUP_FIRST=0): the order before session 9, the smaller group last.
  template <bool kSmallFirst = kFwdSmallGroupFirst>
  FLEXATTN_HD HeadGroupSpan span(int t) const {
    return head_group_span<kSmallFirst>(t, hb, group, nq);
  }

  template <int BM, bool kSmallFirst = kFwdSmallGroupFirst>
  FLEXATTN_HD FwdTile at(int t) const {
    const HeadGroupSpan s = span<kSmallFirst>(t);
    const int qt = nq - 1 - s.within / s.size;
    const int hbi = s.u0 + s.within % s.size;
    return FwdTile{qt * BM, hbi % Hq, hbi / Hq};
  }
};

template <int D, int Dv, int BM>
FLEXATTN_HD FwdTileOrder fwd_tile_order(const AttnParams& p) {
  FwdTileOrder o;
  o.nq = (p.L + BM - 1) / BM;
  o.Hq = p.Hq;
  o.hb = p.Hq * p.B;
  o.group = l2_group_size((long long)p.S * (D + Dv) * 2, o.hb);  // K and V of one head
  o.count = o.nq * o.hb;
  return o;
}

// The work tile the CTA runs for queue position t, as an index of the natural order above (so `at` gives its
// coordinates and the consumers, who get the index from the producer, need no lookup). With p.q_order (the
// mask rows of each (b, h) sorted by their kv-block count, most first; FLEXATTN_SM90_ROW_ORDER, q_order_on) the k-th
// query tile a head takes is row q_order[k] instead of nq - 1 - k: the natural order is longest first only
// for causal-like masks, and with document masks the longest rows can come anywhere (bench/run.py's 8
// documents, B=2 H=16 S=8192, schedule model: makespan 138.0 kv-tile times in the natural order, 134.5 sorted,
// bound 132.8). Only when the mask's rows are the query tiles (q_block = BM, nq rows); an entry out of range keeps
// the natural tile (no out-of-bounds access; a q_order that is not a permutation would run some tiles twice
// and others never, so only flexattn's own builders fill it).
template <int BM>
FLEXATTN_HD int fwd_ordered_index(const FwdTileOrder& o, const AttnParams& p, int t) {
  if (p.q_order == nullptr || p.q_block != BM || p.nq != o.nq) return t;
  // q_order_on == 0: the natural order is longest first already, and no tile waits for the order's lookup (one more
  // dependent load before its first TMA: prefix-LM -0.7 / -1.4 % at D 128 / 64 with the order always on, session
  // 33, H200); the flag's address is the same for every tile (an L1 hit after the first). Not a field of
  // FwdTileOrder: a register live in every role made the tall kernel's 24-register producer spill 14 bytes.
  if (p.q_order_on != nullptr && *p.q_order_on == 0) return t;
  const HeadGroupSpan s = o.span(t);
  const int rank = s.within / s.size, hi = s.within - rank * s.size;
  const int hbi = s.u0 + hi;
  const int b = hbi / o.Hq, h = hbi - b * o.Hq;
  const int mb = p.mask_B > 0 ? p.mask_B : 1, mh = p.mask_H > 0 ? p.mask_H : 1;
  const int qt = p.q_order[((b % mb) * mh + h % mh) * o.nq + rank];
  if (unsigned(qt) >= unsigned(o.nq)) return t;
  return s.t0 + (o.nq - 1 - qt) * s.size + hi;
}

// The coordinates of queue position t (the non-persistent kernel's producer and consumers each compute them).
template <int BM>
FLEXATTN_HD FwdTile fwd_tile_at(const FwdTileOrder& o, const AttnParams& p, int t) {
  return o.template at<BM>(fwd_ordered_index<BM>(o, p, t));
}

// Kv tiles of BN rows that common/mask_iter.cuh's TileWalker yields for one mask block `blk` of
// block = bt * BN rows (the sm90 forward takes only kv blocks that are multiples of its kv tile:
// sm90_mask_blocks_ok), clipped at len = lt * BN - pad: min(bt, lt - blk * bt) for 0 <= blk < nblocks =
// ceil(lt / bt), none for a negative block or one starting at or past len. 32-bit, a handful of
// operations per entry (the count sits on the producer's path between two tiles); unsigned, so a
// garbage index cannot overflow (its result is discarded). Selects, not branches, so a batch of index
// loads stays in flight together.
template <int BN>
FLEXATTN_HD int fwd_kv_tiles_of_block(int blk, unsigned nblocks, int bt, int lt) {
  const int rest = int(unsigned(lt) - unsigned(blk) * unsigned(bt));
  return unsigned(blk) < nblocks ? (bt < rest ? bt : rest) : 0;
}

// One list of the walk; ids == nullptr is the walker's implicit list of cnt zeros (one block of 2^40
// rows: every tile of len).
template <int BN>
FLEXATTN_HD int fwd_count_list(const int* ids, int cnt, long long block, int len) {
  const int lt = len > 0 ? (len + BN - 1) / BN : 0;
  if (ids == nullptr) return cnt > 0 ? cnt * lt : 0;
  const int bt = int(block / BN);  // a list's block is the mask's kv_block, a multiple of BN
  const unsigned nblocks = unsigned(bt > 0 ? (lt + bt - 1) / bt : 0);
  int n = 0, i = 0;
  for (; i + 4 <= cnt; i += 4) {
    const int b0 = ids[i], b1 = ids[i + 1], b2 = ids[i + 2], b3 = ids[i + 3];
    n += fwd_kv_tiles_of_block<BN>(b0, nblocks, bt, lt) + fwd_kv_tiles_of_block<BN>(b1, nblocks, bt, lt) +
         fwd_kv_tiles_of_block<BN>(b2, nblocks, bt, lt) + fwd_kv_tiles_of_block<BN>(b3, nblocks, bt, lt);
  }
  for (; i < cnt; ++i) n += fwd_kv_tiles_of_block<BN>(ids[i], nblocks, bt, lt);
  return n;
}

// The number of kv tiles a TileWalker with these fields (tile = BN) yields: the persistent producer
// publishes it per work tile (handshake 1 above), so it must match the walk exactly -- the same
// implicit list for ids == nullptr, the same skipped indices (tests/compile/sm90 checks it against the
// walker). The producer's single thread reads each list once more here, four entries per round trip
// to L2; the walk that follows finds them in L1.
template <int BN>
FLEXATTN_HD int fwd_count_kv_tiles(const int* idx0, int cnt0, const int* idx1, int cnt1, long long block, int len) {
  return fwd_count_list<BN>(idx0, cnt0, block, len) + fwd_count_list<BN>(idx1, cnt1, block, len);
}

// The tile after `t` for this CTA (see "Queue word" above): from the queue, or the static stride when
// queue is null. `atomic_add` is atomicAdd on the device; the host test passes a simulated one.
template <class AtomicAdd, class Store>
FLEXATTN_HD int fwd_queue_next_with(unsigned* queue, int t, int count, int grid, AtomicAdd atomic_add, Store store) {
  if (queue == nullptr) return t + grid;
  const unsigned v = atomic_add(queue);
  if (v == unsigned(count) - 1u) store(queue);  // the launch's last take: leave the word at 0
  return grid + int(v);
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
__device__ __forceinline__ int fwd_queue_next(unsigned* queue, int t, int count) {
  return fwd_queue_next_with(
      queue, t, count, int(gridDim.x), [](unsigned* q) { return atomicAdd(q, 1u); },
      [](unsigned* q) { atomicExch(q, 0u); });
}

// The producer's tile index as a warp-uniform value: redux.sync writes a uniform register (REDUX.OR
// URx), so ptxas keeps the tile's coordinates, the list walk and the count in uniform registers as it
// did when the index was blockIdx.x + k * gridDim.x. Without it the atomicAdd result is a per-thread
// value and the producer needed about 40 registers: at setmaxnreg 24 ptxas spilled 200-900 bytes in
// every persistent kernel of compile_sm90. Only the producer's one thread runs this: mask = lane 0.
__device__ __forceinline__ int fwd_uniform(int v) {
  return int(redux_or(unsigned(v), 1u));
}
#endif

}  // namespace flexattn::kern::sm90
