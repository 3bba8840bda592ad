// BlockMask layout: sizes, torch's ordered rows, transposition, from_kv_blocks and validate.
#include <algorithm>
#include <limits>
#include <string>

#include "layout_util.h"
#include "flexattn/error.h"

namespace flexattn {
namespace block_mask_detail {
namespace {

std::string s(int64_t v) { return std::to_string(v); }

// Multi-index text "[b,h,r]" used by every message, so the user can find the offending element.
std::string at(int64_t b, int64_t h, int64_t r) {
  std::string out = "[";  // appended, not "[" + std::string&&, which trips GCC 12's -Wrestrict (bug 105329)
  return out.append(s(b)).append(",").append(s(h)).append(",").append(s(r)).append("]");
}

void check_size(const char* who, const char* name, size_t got, int64_t want, const char* formula) {
  check(int64_t(got) == want, std::string(who) + ": " + name + " has " + s(int64_t(got)) +
                                  " elements; expected " + formula + " = " + s(want));
}

// One ordered set ([bh, rows] counts, [bh, rows, cols] ids): counts in [0, cols], the first `count` ids in
// [0, cols) and distinct. `seen` is scratch of `cols` entries, stamped per row to avoid clearing.
void check_ordered(const char* who, const char* num_name, const char* idx_name, const char* col_name,
                   const std::vector<int32_t>& num, const std::vector<int32_t>& idx, int64_t H,
                   int64_t bh, int64_t rows, int64_t cols, std::vector<int64_t>& seen) {
  seen.assign(size_t(cols), -1);
  for (int64_t g = 0; g < bh * rows; ++g) {
    const int64_t b = g / rows / H, h = g / rows % H, r = g % rows;
    const int32_t n = num[size_t(g)];
    check(n >= 0 && n <= cols, std::string(who) + ": " + num_name + at(b, h, r) + " = " + s(n) +
                                   " is out of range; expected 0 <= value <= " + col_name + " = " + s(cols));
    const int32_t* row = idx.data() + g * cols;
    for (int32_t k = 0; k < n; ++k) {
      const int32_t c = row[k];
      check(c >= 0 && c < cols, std::string(who) + ": " + idx_name + at(b, h, r) + "[" + s(k) + "] = " + s(c) +
                                    " is out of range; expected 0 <= value < " + col_name + " = " + s(cols));
      check(seen[size_t(c)] != g, std::string(who) + ": " + idx_name + at(b, h, r) + " lists block " + s(c) +
                                      " twice; expected distinct indices among the first " + s(n));
      seen[size_t(c)] = g;
    }
  }
}

void check_disjoint(const char* who, const char* a_name, const char* b_name, const std::vector<int32_t>& num_a,
                    const std::vector<int32_t>& idx_a, const std::vector<int32_t>& num_b,
                    const std::vector<int32_t>& idx_b, int64_t H, int64_t bh, int64_t rows, int64_t cols) {
  std::vector<int64_t> seen(size_t(cols), -1);
  for (int64_t g = 0; g < bh * rows; ++g) {
    for (int32_t k = 0; k < num_a[size_t(g)]; ++k) seen[size_t(idx_a[size_t(g * cols + k)])] = g;
    for (int32_t k = 0; k < num_b[size_t(g)]; ++k) {
      const int32_t c = idx_b[size_t(g * cols + k)];
      check(seen[size_t(c)] != g, std::string(who) + ": block " + s(c) + " of row " +
                                      at(g / rows / H, g / rows % H, g % rows) + " is in both " + a_name +
                                      " and " + b_name + "; expected disjoint partial and full sets");
    }
  }
}

// Compares a user-provided transpose with the computed one as sets, row by row.
void check_transpose(const char* num_name, const char* idx_name, const std::vector<int32_t>& num,
                     const std::vector<int32_t>& idx, const std::vector<int32_t>& want_num,
                     const std::vector<int32_t>& want_idx, int64_t H, int64_t bh, int64_t cols, int64_t rows,
                     const char* src_name) {
  std::vector<int32_t> got;
  for (int64_t g = 0; g < bh * cols; ++g) {
    const int32_t n = num[size_t(g)];
    got.assign(idx.begin() + g * rows, idx.begin() + g * rows + n);
    std::sort(got.begin(), got.end());
    const bool same = n == want_num[size_t(g)] &&
                      std::equal(got.begin(), got.end(), want_idx.begin() + g * rows);
    check(same, std::string("validate: ") + num_name + "/" + idx_name + at(g / cols / H, g / cols % H, g % cols) +
                    " is not the transpose of " + src_name + "; expected the query blocks whose row lists kv block " +
                    s(g % cols));
  }
}

}  // namespace

int64_t checked_mul(int64_t a, int64_t b, const char* who, const char* what) {
  int64_t r = 0;
  check(!__builtin_mul_overflow(a, b, &r),
        std::string(who) + ": " + what + " is too large (" + s(a) + " * " + s(b) + " overflows int64)");
  return r;
}

void check_geometry(const char* who, int64_t B, int64_t H, int64_t q_len, int64_t kv_len, int64_t q_block,
                    int64_t kv_block) {
  const std::pair<const char*, int64_t> args[] = {{"B", B},           {"H", H},          {"q_len", q_len},
                                                  {"kv_len", kv_len}, {"q_block", q_block}, {"kv_block", kv_block}};
  for (const auto& [name, v] : args)
    check(v >= 1, std::string(who) + ": " + name + " must be >= 1, got " + s(v));
  constexpr int64_t kMaxBlocks = std::numeric_limits<int32_t>::max();
  check(ceil_div(q_len, q_block) <= kMaxBlocks,
        std::string(who) + ": q_len / q_block gives more than 2^31-1 query blocks; indices are int32");
  check(ceil_div(kv_len, kv_block) <= kMaxBlocks,
        std::string(who) + ": kv_len / kv_block gives more than 2^31-1 kv blocks; indices are int32");
  const int64_t rows = checked_mul(checked_mul(B, H, who, "B*H"), ceil_div(q_len, q_block), who, "B*H*nq");
  checked_mul(rows, ceil_div(kv_len, kv_block), who, "B*H*nq*nkv");
}

int32_t write_ordered_row(const uint8_t* member, int64_t n, int32_t* indices) {
  int32_t k = 0;
  for (int64_t i = 0; i < n; ++i)
    if (member[i]) indices[k++] = int32_t(i);
  const int32_t count = k;
  for (int64_t i = 0; i < n; ++i)
    if (!member[i]) indices[k++] = int32_t(i);
  return count;
}

void transpose_ordered(const std::vector<int32_t>& num, const std::vector<int32_t>& indices, int64_t bh,
                       int64_t rows, int64_t cols, std::vector<int32_t>& t_num, std::vector<int32_t>& t_indices) {
  t_num.assign(size_t(bh * cols), 0);
  t_indices.assign(size_t(bh * cols * rows), 0);
  std::vector<uint8_t> dense(size_t(rows * cols));  // one (b, h) at a time: O(blocks)
  for (int64_t g = 0; g < bh; ++g) {
    std::fill(dense.begin(), dense.end(), 0);
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t* row = indices.data() + (g * rows + r) * cols;
      for (int32_t k = 0; k < num[size_t(g * rows + r)]; ++k) dense[size_t(row[k] * rows + r)] = 1;
    }
    for (int64_t c = 0; c < cols; ++c)
      t_num[size_t(g * cols + c)] =
          write_ordered_row(dense.data() + c * rows, rows, t_indices.data() + (g * cols + c) * rows);
  }
}

void compute_q_side(BlockMask& bm) {
  const int64_t bh = bm.B * bm.H;
  transpose_ordered(bm.kv_num_blocks, bm.kv_indices, bh, bm.nq, bm.nkv, bm.q_num_blocks, bm.q_indices);
  if (bm.has_full) {
    transpose_ordered(bm.full_kv_num_blocks, bm.full_kv_indices, bh, bm.nq, bm.nkv, bm.full_q_num_blocks,
                      bm.full_q_indices);
  } else {
    bm.full_q_num_blocks.clear();
    bm.full_q_indices.clear();
  }
}

void check_kv_side(const BlockMask& bm, const char* who) {
  check_geometry(who, bm.B, bm.H, bm.q_len, bm.kv_len, bm.q_block, bm.kv_block);
  const int64_t want_nq = ceil_div(bm.q_len, bm.q_block), want_nkv = ceil_div(bm.kv_len, bm.kv_block);
  check(bm.nq == want_nq, std::string(who) + ": nq = " + s(bm.nq) + " does not match q_len = " + s(bm.q_len) +
                              "; expected ceil(q_len / q_block) = ceil(" + s(bm.q_len) + " / " +
                              s(bm.q_block) + ") = " + s(want_nq));
  check(bm.nkv == want_nkv, std::string(who) + ": nkv = " + s(bm.nkv) + " does not match kv_len = " +
                                s(bm.kv_len) + "; expected ceil(kv_len / kv_block) = ceil(" + s(bm.kv_len) +
                                " / " + s(bm.kv_block) + ") = " + s(want_nkv));
  const int64_t bh = bm.B * bm.H, rows = bh * bm.nq, cells = rows * bm.nkv;
  check_size(who, "kv_num_blocks", bm.kv_num_blocks.size(), rows, "B*H*nq");
  check_size(who, "kv_indices", bm.kv_indices.size(), cells, "B*H*nq*nkv");
  if (bm.has_full) {
    check_size(who, "full_kv_num_blocks", bm.full_kv_num_blocks.size(), rows, "B*H*nq");
    check_size(who, "full_kv_indices", bm.full_kv_indices.size(), cells, "B*H*nq*nkv");
  } else {
    check(bm.full_kv_num_blocks.empty() && bm.full_kv_indices.empty(),
          std::string(who) + ": full_kv_num_blocks/full_kv_indices are set but has_full is false; expected "
                             "empty vectors or has_full = true");
  }
  std::vector<int64_t> seen;
  check_ordered(who, "kv_num_blocks", "kv_indices", "nkv", bm.kv_num_blocks, bm.kv_indices, bm.H, bh, bm.nq,
                bm.nkv, seen);
  if (!bm.has_full) return;
  check_ordered(who, "full_kv_num_blocks", "full_kv_indices", "nkv", bm.full_kv_num_blocks, bm.full_kv_indices,
                bm.H, bh, bm.nq, bm.nkv, seen);
  check_disjoint(who, "kv_indices", "full_kv_indices", bm.kv_num_blocks, bm.kv_indices, bm.full_kv_num_blocks,
                 bm.full_kv_indices, bm.H, bh, bm.nq, bm.nkv);
}

void row_classes(const BlockMask& bm, int64_t b, int64_t h, int64_t row, uint8_t* out) {
  const int64_t g = (b * bm.H + h) * bm.nq + row;
  std::fill(out, out + bm.nkv, kBlockSkipped);
  for (int32_t k = 0; k < bm.kv_num_blocks[size_t(g)]; ++k) out[bm.kv_indices[size_t(g * bm.nkv + k)]] = kBlockPartial;
  if (!bm.has_full) return;
  for (int32_t k = 0; k < bm.full_kv_num_blocks[size_t(g)]; ++k)
    out[bm.full_kv_indices[size_t(g * bm.nkv + k)]] = kBlockFull;
}

BlockMask empty_like_geometry(int64_t B, int64_t H, int64_t q_len, int64_t kv_len, int q_block, int kv_block,
                              bool has_full) {
  BlockMask bm;
  bm.B = B, bm.H = H, bm.q_len = q_len, bm.kv_len = kv_len, bm.q_block = q_block, bm.kv_block = kv_block;
  bm.nq = ceil_div(q_len, q_block), bm.nkv = ceil_div(kv_len, kv_block);
  bm.has_full = has_full;
  const size_t rows = size_t(B * H * bm.nq), cells = rows * size_t(bm.nkv);
  bm.kv_num_blocks.assign(rows, 0);
  bm.kv_indices.assign(cells, 0);
  if (has_full) {
    bm.full_kv_num_blocks.assign(rows, 0);
    bm.full_kv_indices.assign(cells, 0);
  }
  return bm;
}

}  // namespace block_mask_detail

using namespace block_mask_detail;

BlockMask from_kv_blocks(const std::vector<int32_t>& kv_num_blocks, const std::vector<int32_t>& kv_indices,
                         const std::vector<int32_t>* full_kv_num_blocks, const std::vector<int32_t>* full_kv_indices,
                         int64_t B, int64_t H, int64_t nq, int64_t nkv_cols, int q_block, int kv_block,
                         int64_t q_len, int64_t kv_len) {
  const char* who = "from_kv_blocks";
  check((full_kv_num_blocks == nullptr) == (full_kv_indices == nullptr),
        "from_kv_blocks: full_kv_num_blocks and full_kv_indices must both be given or both be null");
  check(nq >= 1, "from_kv_blocks: nq must be >= 1, got " + s(nq));
  check(nkv_cols >= 1, "from_kv_blocks: nkv_cols must be >= 1, got " + s(nkv_cols));
  check(q_len == -1 || q_len >= 1, "from_kv_blocks: q_len must be >= 1 or -1 (= nq * q_block), got " + s(q_len));
  check(kv_len == -1 || kv_len >= 1,
        "from_kv_blocks: kv_len must be >= 1 or -1 (= nkv_cols * kv_block), got " + s(kv_len));
  check(q_block >= 1, "from_kv_blocks: q_block must be >= 1, got " + s(q_block));
  check(kv_block >= 1, "from_kv_blocks: kv_block must be >= 1, got " + s(kv_block));
  BlockMask bm;
  bm.B = B, bm.H = H, bm.q_block = q_block, bm.kv_block = kv_block, bm.nq = nq, bm.nkv = nkv_cols;
  bm.q_len = q_len == -1 ? checked_mul(nq, q_block, who, "nq * q_block") : q_len;
  bm.kv_len = kv_len == -1 ? checked_mul(nkv_cols, kv_block, who, "nkv_cols * kv_block") : kv_len;
  bm.has_full = full_kv_num_blocks != nullptr;
  bm.kv_num_blocks = kv_num_blocks;
  bm.kv_indices = kv_indices;
  if (bm.has_full) {
    bm.full_kv_num_blocks = *full_kv_num_blocks;
    bm.full_kv_indices = *full_kv_indices;
  }
  check_kv_side(bm, who);
  compute_q_side(bm);
  return bm;
}

void validate(const BlockMask& bm) {
  const char* who = "validate";
  check_kv_side(bm, who);
  const int64_t bh = bm.B * bm.H, cols = bh * bm.nkv, cells = cols * bm.nq;
  const char* hint = " (from_kv_blocks computes the transposes)";
  check(int64_t(bm.q_num_blocks.size()) == cols,
        "validate: q_num_blocks has " + s(int64_t(bm.q_num_blocks.size())) + " elements; expected B*H*nkv = " +
            s(cols) + hint);
  check(int64_t(bm.q_indices.size()) == cells, "validate: q_indices has " + s(int64_t(bm.q_indices.size())) +
                                                   " elements; expected B*H*nkv*nq = " + s(cells) + hint);
  if (bm.has_full) {
    check_size(who, "full_q_num_blocks", bm.full_q_num_blocks.size(), cols, "B*H*nkv");
    check_size(who, "full_q_indices", bm.full_q_indices.size(), cells, "B*H*nkv*nq");
  } else {
    check(bm.full_q_num_blocks.empty() && bm.full_q_indices.empty(),
          "validate: full_q_num_blocks/full_q_indices are set but has_full is false; expected empty vectors or "
          "has_full = true");
  }
  std::vector<int64_t> seen;
  check_ordered(who, "q_num_blocks", "q_indices", "nq", bm.q_num_blocks, bm.q_indices, bm.H, bh, bm.nkv, bm.nq, seen);
  std::vector<int32_t> want_num, want_idx;
  transpose_ordered(bm.kv_num_blocks, bm.kv_indices, bh, bm.nq, bm.nkv, want_num, want_idx);
  check_transpose("q_num_blocks", "q_indices", bm.q_num_blocks, bm.q_indices, want_num, want_idx, bm.H, bh, bm.nkv,
                  bm.nq, "kv_num_blocks/kv_indices");
  if (!bm.has_full) return;
  check_ordered(who, "full_q_num_blocks", "full_q_indices", "nq", bm.full_q_num_blocks, bm.full_q_indices, bm.H, bh,
                bm.nkv, bm.nq, seen);
  transpose_ordered(bm.full_kv_num_blocks, bm.full_kv_indices, bh, bm.nq, bm.nkv, want_num, want_idx);
  check_transpose("full_q_num_blocks", "full_q_indices", bm.full_q_num_blocks, bm.full_q_indices, want_num, want_idx,
                  bm.H, bh, bm.nkv, bm.nq, "full_kv_num_blocks/full_kv_indices");
}

}  // namespace flexattn
