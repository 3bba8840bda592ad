#pragma once
// Tile scheduler of the persistent sm90 forward: one CTA per SM walks the (query tile, head, batch)
// tiles with a static stride, so the producer loads the next tile's Q, K and V while the consumers
// still finish the previous tile (on the H200, one CTA per SM with a per-tile grid left every prologue
// and epilogue exposed: sliding-window and document masks ran at half the dense rate, bench/RESULTS.md).
//
// Order (the producer and both consumer warpgroups compute the same one, so no queue is needed):
// heads in groups whose K and V fit in about half of the L2, and inside a group the query tiles
// longest first (the last tiles of causal-like masks have the most kv tiles) with the group's heads
// next to each other, so concurrently running CTAs share K/V in L2 and the tail holds the short tiles.
//
// Handshake of the persistent kernel (attn_fwd_sm90<..., kPersistent = true>; the default kernel,
// one CTA per tile, keeps the end-marker protocol of fwd_producer_sm90.cuh). Work tile i of a CTA
// uses Q buffer qb = i % QB (QB = 2 at d <= 128, tile_config_sm90.h) for the u = i / QB-th time.
//  1. The producer counts the tile's kv tiles n_i (fwd_count_kv_tiles: the same sequence TileWalker
//     yields) and writes n_i into kv_count(qb) before its arrival on full_q(qb). Consumers wait on
//     full_q(qb) with parity u & 1, then read n_i: both warpgroups consume exactly n_i ring slots, so
//     the ring carries only kv tiles (no end-marker slot) and its (stage, phase) runs on across tiles
//     in step on both sides. n_i = 0: no Q load (a plain arrival), no ring slot, O = 0, lse = -inf.
//  2. Before writing kv_count(qb) and loading Q into qb for use u >= 1, the producer waits on
//     q_free(qb) with parity (u - 1) & 1: both warpgroups' O stores of tile i - QB have read the buffer
//     (their O was staged in it), and both have read n_{i - QB}. Neither barrier can run a phase ahead
//     of its waiter: use u + 1 of qb needs the q_free of use u, which comes after the consumers' wait.
//  3. With QB = 2 the producer loads Q_{i+1} as soon as tile i's last K/V is issued; the q_free it
//     waits for is tile i-1's, so tile i's epilogue never holds back tile i+1's Q or K/V. With QB = 1
//     it issues tile i+1's first K/V before waiting for tile i's epilogue (q_free), as the default does.
//  4. Ping-pong (fwd_consumer_sm90.cuh, Turns): one token for the CTA's life. Warpgroup 1 grants it
//     once before the first tile, warpgroup 0 takes the last grant after the last tile; in between each
//     warpgroup takes and gives it n_i + 1 times per tile, alternately, so exactly one grant is pending
//     at any time and it sits on warpgroup 0's barrier at every tile change. (Per-tile start / finish
//     would let warpgroup 1 grant tile i+1's first turn, now that its Q no longer waits for tile i's
//     epilogues, while warpgroup 0 has yet to take tile i's last grant: two grants on one barrier.)
#include "common/params.h"

namespace flexattn::kern::sm90 {

constexpr long long kL2KvBudgetBytes = 24ll << 20;  // H100 / H200 L2: 50 MiB

struct FwdTile {
  int q0, h, b;  // first query row, query head, batch
};

struct FwdTileOrder {
  int nq, Hq, hb, group, count;  // query tiles, heads, heads x batches, heads per group, tiles

  template <int BM>
  FLEXATTN_HD FwdTile at(int t) const {
    const int g = t / (group * nq);
    const int within = t - g * group * nq;
    const int size = group < hb - g * group ? group : hb - g * group;  // the last group may be smaller
    const int qt = nq - 1 - within / size;
    const int hbi = g * group + within % size;
    return FwdTile{qt * BM, hbi % Hq, hbi / Hq};
  }
};

template <int D, int Dv, int BM>
FLEXATTN_HD FwdTileOrder fwd_tile_order(const AttnParams& p) {
  FwdTileOrder o;
  o.nq = (p.L + BM - 1) / BM;
  o.Hq = p.Hq;
  o.hb = p.Hq * p.B;
  const long long kv_bytes = (long long)p.S * (D + Dv) * 2;
  const long long fit = kL2KvBudgetBytes / (kv_bytes > 0 ? kv_bytes : 1);
  o.group = (int)(fit < 1 ? 1 : (fit > o.hb ? o.hb : fit));
  o.count = o.nq * o.hb;
  return o;
}

// Kv tiles of BN rows that common/mask_iter.cuh's TileWalker yields for one mask block `blk` of
// `block` rows (at least one tile for a valid block: the walker yields a block's first tile before it
// looks at the block size), clipped at len; none for a negative block or one starting at or past len.
// Selects, not branches, so a batch of index loads stays in flight together.
template <int BN>
FLEXATTN_HD int fwd_kv_tiles_of_block(int blk, long long block, int len) {
  const long long rest = (long long)len - (long long)blk * block;
  const long long span = block < rest ? block : rest;
  const int tiles = span > BN ? (int)((unsigned long long)(span + BN - 1) / BN) : 1;
  return blk >= 0 && rest > 0 ? tiles : 0;
}

// One list of the walk; ids == nullptr is the walker's implicit list of cnt zeros.
template <int BN>
FLEXATTN_HD int fwd_count_list(const int* ids, int cnt, long long block, int len) {
  if (ids == nullptr) return cnt > 0 ? cnt * fwd_kv_tiles_of_block<BN>(0, block, len) : 0;
  int n = 0, i = 0;
  for (; i + 4 <= cnt; i += 4) {
    const int b0 = ids[i], b1 = ids[i + 1], b2 = ids[i + 2], b3 = ids[i + 3];
    n += fwd_kv_tiles_of_block<BN>(b0, block, len) + fwd_kv_tiles_of_block<BN>(b1, block, len) +
         fwd_kv_tiles_of_block<BN>(b2, block, len) + fwd_kv_tiles_of_block<BN>(b3, block, len);
  }
  for (; i < cnt; ++i) n += fwd_kv_tiles_of_block<BN>(ids[i], block, len);
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

}  // namespace flexattn::kern::sm90
