// BlockMask operations: statistics, sparsity, query-row slicing, tile-wise AND / OR.
#include <algorithm>
#include <string>

#include "layout_util.h"
#include "flexattn/error.h"

namespace flexattn {

using namespace block_mask_detail;

namespace {

int64_t sum(const std::vector<int32_t>& v) {
  int64_t total = 0;
  for (int32_t x : v) total += x;
  return total;
}

// Combines two masks tile by tile with `op(class_a, class_b) -> class`.
template <typename Op>
BlockMask combine(const BlockMask& a, const BlockMask& b, const char* who, bool has_full, Op op) {
  check_kv_side(a, who);
  check_kv_side(b, who);
  const auto same = [&](const char* what, int64_t x, int64_t y) {
    check(x == y, std::string(who) + ": " + what + " differs (" + std::to_string(x) + " vs " + std::to_string(y) +
                      "); expected both masks to have the same " + what);
  };
  same("q_len", a.q_len, b.q_len);
  same("kv_len", a.kv_len, b.kv_len);
  same("q_block", a.q_block, b.q_block);
  same("kv_block", a.kv_block, b.kv_block);
  const auto broadcast = [&](const char* what, int64_t x, int64_t y) {
    check(x == y || x == 1 || y == 1, std::string(who) + ": " + what + " = " + std::to_string(x) + " and " +
                                          std::to_string(y) + " do not broadcast; expected equal sizes or one of them 1");
    return std::max(x, y);
  };
  const int64_t B = broadcast("B", a.B, b.B), H = broadcast("H", a.H, b.H);
  BlockMask out = empty_like_geometry(B, H, a.q_len, a.kv_len, a.q_block, a.kv_block, has_full);
  std::vector<uint8_t> ca(size_t(out.nkv)), cb(size_t(out.nkv)), partial(size_t(out.nkv)), full(size_t(out.nkv));
  for (int64_t bi = 0; bi < B; ++bi) {
    for (int64_t hi = 0; hi < H; ++hi) {
      for (int64_t r = 0; r < out.nq; ++r) {
        row_classes(a, bi % a.B, hi % a.H, r, ca.data());
        row_classes(b, bi % b.B, hi % b.H, r, cb.data());
        for (int64_t c = 0; c < out.nkv; ++c) {
          const uint8_t k = op(ca[size_t(c)], cb[size_t(c)]);
          partial[size_t(c)] = k == kBlockPartial;
          full[size_t(c)] = k == kBlockFull;
        }
        const int64_t g = (bi * H + hi) * out.nq + r;
        out.kv_num_blocks[size_t(g)] = write_ordered_row(partial.data(), out.nkv, out.kv_indices.data() + g * out.nkv);
        if (has_full)
          out.full_kv_num_blocks[size_t(g)] =
              write_ordered_row(full.data(), out.nkv, out.full_kv_indices.data() + g * out.nkv);
      }
    }
  }
  compute_q_side(out);
  return out;
}

}  // namespace

BlockMaskStats block_mask_stats(const BlockMask& bm) {
  check_kv_side(bm, "block_mask_stats");
  BlockMaskStats st;
  st.total = bm.B * bm.H * bm.nq * bm.nkv;
  st.partial = sum(bm.kv_num_blocks);
  st.full = bm.has_full ? sum(bm.full_kv_num_blocks) : 0;
  st.skipped = st.total - st.partial - st.full;
  return st;
}

std::vector<int32_t> block_mask_row_order(const BlockMask& bm) {
  check_kv_side(bm, "block_mask_row_order");
  std::vector<int32_t> order(size_t(bm.B * bm.H * bm.nq));
  std::vector<int64_t> count(size_t(bm.nq));
  for (int64_t s = 0; s < bm.B * bm.H; ++s) {
    for (int64_t r = 0; r < bm.nq; ++r) {
      const size_t g = size_t(s * bm.nq + r);
      count[size_t(r)] = int64_t(bm.kv_num_blocks[g]) + (bm.has_full ? bm.full_kv_num_blocks[g] : 0);
    }
    // Ties keep the natural order (last rows first), so a mask whose natural order is already longest first
    // (causal, sliding windows) gets exactly that order back: session 10 measured this option with ties in
    // ascending row order, and sliding windows (most rows tied) ran 5 % slower.
    int32_t* row = order.data() + s * bm.nq;
    for (int64_t r = 0; r < bm.nq; ++r) row[r] = int32_t(bm.nq - 1 - r);
    std::stable_sort(row, row + bm.nq, [&](int32_t a, int32_t b) { return count[size_t(a)] > count[size_t(b)]; });
  }
  return order;
}

double sparsity(const BlockMask& bm) {
  const BlockMaskStats st = block_mask_stats(bm);
  return 100.0 * double(st.skipped) / double(st.total);
}

double torch_sparsity(const BlockMask& bm) {
  const BlockMaskStats st = block_mask_stats(bm);
  // torch: 100 * (1 - computed_blocks * Q_BLOCK * KV_BLOCK / numel(B, H, q_len, kv_len)).
  const double computed = double(st.partial + st.full) * bm.q_block * bm.kv_block;
  const double numel = double(bm.B) * double(bm.H) * double(bm.q_len) * double(bm.kv_len);
  return 100.0 * (1.0 - computed / numel);
}

BlockMask slice_q_blocks(const BlockMask& bm, int64_t row_begin, int64_t row_end) {
  check_kv_side(bm, "slice_q_blocks");
  check(row_begin >= 0 && row_begin < row_end && row_end <= bm.nq,
        "slice_q_blocks: rows [" + std::to_string(row_begin) + ", " + std::to_string(row_end) +
            ") are not a non-empty range of query-block rows; expected 0 <= row_begin < row_end <= nq = " +
            std::to_string(bm.nq));
  const int64_t q_len = std::min(bm.q_len, row_end * int64_t(bm.q_block)) - row_begin * int64_t(bm.q_block);
  BlockMask out = empty_like_geometry(bm.B, bm.H, q_len, bm.kv_len, bm.q_block, bm.kv_block, bm.has_full);
  const int64_t rows = row_end - row_begin, nkv = bm.nkv;
  for (int64_t g = 0; g < bm.B * bm.H; ++g) {
    const int64_t src = g * bm.nq + row_begin, dst = g * rows;
    std::copy_n(bm.kv_num_blocks.begin() + src, rows, out.kv_num_blocks.begin() + dst);
    std::copy_n(bm.kv_indices.begin() + src * nkv, rows * nkv, out.kv_indices.begin() + dst * nkv);
    if (!bm.has_full) continue;
    std::copy_n(bm.full_kv_num_blocks.begin() + src, rows, out.full_kv_num_blocks.begin() + dst);
    std::copy_n(bm.full_kv_indices.begin() + src * nkv, rows * nkv, out.full_kv_indices.begin() + dst * nkv);
  }
  compute_q_side(out);
  return out;
}

BlockMask and_block_masks(const BlockMask& a, const BlockMask& b) {
  return combine(a, b, "and_block_masks", a.has_full && b.has_full, [](uint8_t x, uint8_t y) -> uint8_t {
    if (x == kBlockSkipped || y == kBlockSkipped) return kBlockSkipped;
    return x == kBlockFull && y == kBlockFull ? kBlockFull : kBlockPartial;
  });
}

BlockMask or_block_masks(const BlockMask& a, const BlockMask& b) {
  return combine(a, b, "or_block_masks", a.has_full || b.has_full, [](uint8_t x, uint8_t y) -> uint8_t {
    if (x == kBlockFull || y == kBlockFull) return kBlockFull;
    return x == kBlockSkipped && y == kBlockSkipped ? kBlockSkipped : kBlockPartial;
  });
}

}  // namespace flexattn
