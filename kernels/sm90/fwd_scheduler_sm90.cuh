#pragma once
// Tile scheduler of the persistent sm90 forward: one CTA per SM walks the (query tile, head, batch)
// tiles with a static stride, so the producer loads the next tile's K and V while the consumers still
// finish the previous tile (on the H200, one CTA per SM with a per-tile grid left every prologue and
// epilogue exposed: sliding-window and document masks ran at half the dense rate, bench/RESULTS.md).
//
// Order (the producer and both consumer warpgroups compute the same one, so no queue is needed):
// heads in groups whose K and V fit in about half of the L2, and inside a group the query tiles
// longest first (the last tiles of causal-like masks have the most kv tiles) with the group's heads
// next to each other, so concurrently running CTAs share K/V in L2 and the tail holds the short tiles.
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

}  // namespace flexattn::kern::sm90
