#pragma once
// Walks one row of a block-sparse list pair (partial blocks, then full blocks; or both merged in block order,
// next<true>) as a sequence of compute tiles. A mask block of `block` rows expands into block / tile compute
// tiles; tiles starting at or past `len` are dropped, as are negative or out-of-range block indices (bad input
// is skipped, never read out of bounds). Every thread of a CTA walks the same sequence (the index loads are broadcasts).
#include "common/params.h"

namespace flexattn::kern {

struct TileWalker {
  // Two lists as scalars, not arrays: a runtime-indexed array would live in local memory.
  const int* idx0;  // null with cnt0 == 1: the implicit list {0} (no block mask)
  const int* idx1;
  int cnt0, cnt1;
  long long block;  // mask block size along the walked dimension
  int tile, len;
  int phase, pos, sub;
  // Current tile after a successful next().
  int start;
  bool full;

  // row: flattened (b, h, mask row) of the list; ncols: the list's last-dim extent.
  FLEXATTN_HD_INLINE void init(const int* num, const int* ind, const int* fnum, const int* find,
                                       long long row, bool row_ok, int ncols, int block_size, int tile_size,
                                       int length) {
    tile = tile_size;
    len = length;
    phase = 0;
    pos = 0;
    sub = 0;
    start = 0;
    full = false;
    idx0 = idx1 = nullptr;
    cnt0 = cnt1 = 0;
    block = block_size;
    if (num == nullptr) {
      cnt0 = 1;
      block = 1ll << 40;  // one block covering every tile
      return;
    }
    if (!row_ok) return;
    int c = num[row];
    cnt0 = c < 0 ? 0 : (c > ncols ? ncols : c);
    idx0 = ind + row * ncols;
    if (fnum != nullptr && find != nullptr) {
      c = fnum[row];
      cnt1 = c < 0 ? 0 : (c > ncols ? ncols : c);
      idx1 = find + row * ncols;
    }
  }

  // kMerged (the backward's query walk, BwdTileIter): both lists in one pass, the smaller block of the two heads first,
  // so ascending when the lists are (create_block_mask's are); `phase` is then the full list's position (a register
  // of its own spilled the first kernel's producer at D = 128). Why: the deterministic sm90 backward adds a query
  // tile's dQ partials in descending kv-tile order (sm90/bwd_dq_order_sm90.h), so a kv tile's walk must visit its
  // query tiles in ascending order to meet its predecessors' arrivals. Partial then full visits a sliding window's far
  // edge (partial) before the blocks between (full): each kv tile then waited for the whole walk of the one above it
  // (session 19, B=2 H=16 S=8192 D=128: deterministic 12.4 ms against 0.84).
  template <bool kMerged = false>
  FLEXATTN_HD_INLINE bool next() {
    if constexpr (kMerged) return next_merged();
    else return next_lists();
  }

  // Compute tile `sub` of mask block blk: true with `start` set when it exists (blk valid, inside len); done is set
  // when the walk moves past blk (sub back to 0).
  FLEXATTN_HD_INLINE bool tile_of(int blk, bool& done) {
    const long long s = (long long)blk * block + (long long)sub * tile;
    const bool ok = blk >= 0 && s < len;
    done = !ok || ++sub * (long long)tile >= block || s + tile >= len;
    if (done) sub = 0;
    if (ok) start = (int)s;
    return ok;
  }

  FLEXATTN_HD_INLINE bool next_lists() {
    while (phase < 2) {
      const int* ids = phase == 0 ? idx0 : idx1;
      if (pos >= (phase == 0 ? cnt0 : cnt1)) {
        ++phase;
        pos = 0;
        sub = 0;
        continue;
      }
      bool done;
      const bool ok = tile_of(ids == nullptr ? 0 : ids[pos], done);
      if (done) ++pos;
      if (ok) {
        full = phase == 1;
        return true;
      }
    }
    return false;
  }

  FLEXATTN_HD_INLINE bool next_merged() {
    while (pos < cnt0 || phase < cnt1) {
      const int b0 = pos < cnt0 ? (idx0 == nullptr ? 0 : idx0[pos]) : 0x7fffffff;
      const int b1 = phase < cnt1 ? idx1[phase] : 0x7fffffff;
      const bool second = b1 < b0;
      bool done;
      const bool ok = tile_of(second ? b1 : b0, done);
      if (done) {
        if (second)
          ++phase;
        else
          ++pos;
      }
      if (ok) {
        full = second;
        return true;
      }
    }
    return false;
  }
};

// Row of the list arrays for (b, h, mask row / column r); mask_B / mask_H < 1 read as 1.
FLEXATTN_HD_INLINE long long mask_list_row(const AttnParams& p, int b, int h, long long r, int n) {
  const int mb = p.mask_B > 0 ? p.mask_B : 1, mh = p.mask_H > 0 ? p.mask_H : 1;
  return ((long long)(b % mb) * mh + (h % mh)) * n + r;
}

// Forward / dQ direction: the kv tiles attended by the query tile starting at q0.
FLEXATTN_HD_INLINE void init_kv_walker(TileWalker& w, const AttnParams& p, int b, int h, int q0,
                                               int kv_tile) {
  if (p.kv_num_blocks == nullptr) {  // no block mask
    w.init(nullptr, nullptr, nullptr, nullptr, 0, true, 1, 1, kv_tile, p.S);
    return;
  }
  const long long mrow = q0 / (long long)(p.q_block > 0 ? p.q_block : 1);
  w.init(p.kv_num_blocks, p.kv_indices, p.full_kv_num_blocks, p.full_kv_indices, mask_list_row(p, b, h, mrow, p.nq),
         mrow < p.nq, p.nkv, p.kv_block, kv_tile, p.S);
}

// dK/dV direction: the query tiles that attend the kv tile starting at kv0 (transposed lists).
FLEXATTN_HD_INLINE void init_q_walker(TileWalker& w, const AttnParams& p, int b, int h, int kv0,
                                              int q_tile) {
  if (p.kv_num_blocks == nullptr) {  // no block mask: the transposed lists are implicit too
    w.init(nullptr, nullptr, nullptr, nullptr, 0, true, 1, 1, q_tile, p.L);
    return;
  }
  const long long mcol = kv0 / (long long)(p.kv_block > 0 ? p.kv_block : 1);
  // A mask without transposed lists attends nothing here (the host rejects it before the backward).
  const bool ok = mcol < p.nkv && p.q_num_blocks != nullptr && p.q_indices != nullptr;
  w.init(ok ? p.q_num_blocks : p.kv_num_blocks, p.q_indices, p.full_q_num_blocks, p.full_q_indices,
         mask_list_row(p, b, h, mcol, p.nkv), ok, p.nq, p.q_block, q_tile, p.L);
}

}  // namespace flexattn::kern
