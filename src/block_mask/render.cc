// BlockMask inspection: dense tile classes and a text picture like torch's BlockMask.to_string.
#include <algorithm>
#include <cstdio>
#include <string>

#include "layout_util.h"
#include "flexattn/error.h"

namespace flexattn {

using namespace block_mask_detail;

std::vector<uint8_t> to_dense(const BlockMask& bm) {
  check_kv_side(bm, "to_dense");
  std::vector<uint8_t> dense(size_t(bm.B * bm.H * bm.nq * bm.nkv));
  for (int64_t b = 0; b < bm.B; ++b)
    for (int64_t h = 0; h < bm.H; ++h)
      for (int64_t r = 0; r < bm.nq; ++r) row_classes(bm, b, h, r, dense.data() + ((b * bm.H + h) * bm.nq + r) * bm.nkv);
  return dense;
}

std::vector<uint8_t> to_dense_01(const BlockMask& bm) {
  std::vector<uint8_t> dense = to_dense(bm);
  for (uint8_t& v : dense) v = v != kBlockSkipped;
  return dense;
}

std::string to_string(const BlockMask& bm, int max_rows, bool ascii, int limit) {
  check(max_rows >= 1 || max_rows == -1,
        "to_string: max_rows must be >= 1 or -1 (one cell per tile), got " + std::to_string(max_rows));
  check(limit >= 1 || limit == -1, "to_string: limit must be >= 1 or -1 (all (b, h) pairs), got " + std::to_string(limit));
  const std::vector<uint8_t> dense = to_dense(bm);
  // UTF-8 of U+2588 FULL BLOCK and U+2591 LIGHT SHADE, torch's glyphs.
  const char* glyph_full = ascii ? "##" : "\xe2\x96\x88\xe2\x96\x88";
  const char* glyph_partial = ascii ? "++" : "\xe2\x96\x91\xe2\x96\x91";
  const char* glyph_empty = ascii ? ".." : "  ";

  char header[256];
  std::snprintf(header, sizeof header, "BlockMask(shape=(%lld, %lld, %lld, %lld), block=(%d, %d), sparsity=%.2f%%)\n",
                (long long)bm.B, (long long)bm.H, (long long)bm.q_len, (long long)bm.kv_len, bm.q_block, bm.kv_block,
                sparsity(bm));
  std::string out = header;
  const int64_t row_step = max_rows == -1 ? 1 : ceil_div(bm.nq, max_rows);
  const int64_t col_step = max_rows == -1 ? 1 : ceil_div(bm.nkv, max_rows);
  const int64_t pairs = bm.B * bm.H;
  for (int64_t g = 0; g < pairs; ++g) {
    if (limit != -1 && g == limit) {
      out += "...\n(" + std::to_string(pairs - limit) + " more (b, h) pairs; raise limit to see them)\n";
      break;
    }
    if (g > 0) out += "\n";
    out.append("(").append(std::to_string(g / bm.H)).append(", ").append(std::to_string(g % bm.H)).append(")\n");
    const uint8_t* tiles = dense.data() + g * bm.nq * bm.nkv;
    for (int64_t r0 = 0; r0 < bm.nq; r0 += row_step) {
      for (int64_t c0 = 0; c0 < bm.nkv; c0 += col_step) {
        bool all_full = true, all_empty = true;
        for (int64_t r = r0; r < std::min(r0 + row_step, bm.nq); ++r) {
          for (int64_t c = c0; c < std::min(c0 + col_step, bm.nkv); ++c) {
            const uint8_t t = tiles[r * bm.nkv + c];
            all_full = all_full && t == kBlockFull;
            all_empty = all_empty && t == kBlockSkipped;
          }
        }
        out += all_full ? glyph_full : all_empty ? glyph_empty : glyph_partial;
      }
      out += "\n";
    }
  }
  return out;
}

}  // namespace flexattn
