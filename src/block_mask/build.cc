// build_block_mask: tile classification by evaluating the mask row by row, spread over std::threads.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include "layout_util.h"
#include "flexattn/error.h"

namespace flexattn {
namespace {

using block_mask_detail::write_ordered_row;

// More threads than this only adds start-up cost on any machine we target.
constexpr int64_t kMaxThreads = 256;
constexpr uint8_t kSawTrue = 1, kSawFalse = 2, kDecided = kSawTrue | kSawFalse;

// Per-thread scratch: O(nkv + kv_block) bytes, never O(q_len * kv_len).
struct RowScratch {
  std::vector<uint8_t> flags, values, member;
  std::vector<int32_t> starts;  // the range builder's per-tile interval starts and ends
};

// Classifies every tile of query-block row (b, h, r) and writes its ordered partial and full rows.
void classify_row(const MaskRowFn& mask, BlockMask& bm, int64_t b, int64_t h, int64_t r, RowScratch& s) {
  const int64_t q0 = r * bm.q_block, q1 = std::min(q0 + bm.q_block, bm.q_len);
  const bool q_tail = q0 + bm.q_block > bm.q_len;
  // A tile reaching past a length contains padding, which counts as False: it can never be full.
  for (int64_t c = 0; c < bm.nkv; ++c)
    s.flags[size_t(c)] = (q_tail || (c + 1) * bm.kv_block > bm.kv_len) ? kSawFalse : 0;
  int64_t undecided = bm.nkv;
  for (int64_t q = q0; q < q1 && undecided > 0; ++q) {
    for (int64_t c = 0; c < bm.nkv; ++c) {
      uint8_t& f = s.flags[size_t(c)];
      if (f == kDecided) continue;
      const int64_t k0 = c * bm.kv_block, k1 = std::min(k0 + bm.kv_block, bm.kv_len), n = k1 - k0;
      // Zeroed first so that a mask that forgets to write an entry reads as False, deterministically.
      std::memset(s.values.data(), 0, size_t(n));
      mask(b, h, q, k0, k1, s.values.data());
      int64_t trues = 0;
      for (int64_t j = 0; j < n; ++j) trues += s.values[size_t(j)] != 0;
      if (trues > 0) f |= kSawTrue;
      if (trues < n) f |= kSawFalse;
      if (f == kDecided) --undecided;
    }
  }
  const int64_t g = (b * bm.H + h) * bm.nq + r;
  for (int64_t c = 0; c < bm.nkv; ++c) s.member[size_t(c)] = s.flags[size_t(c)] == kDecided;
  bm.kv_num_blocks[size_t(g)] = write_ordered_row(s.member.data(), bm.nkv, bm.kv_indices.data() + g * bm.nkv);
  for (int64_t c = 0; c < bm.nkv; ++c) s.member[size_t(c)] = s.flags[size_t(c)] == kSawTrue;
  bm.full_kv_num_blocks[size_t(g)] =
      write_ordered_row(s.member.data(), bm.nkv, bm.full_kv_indices.data() + g * bm.nkv);
}

// Runs row(g, scratch) for g in [0, rows) on up to `workers` threads (the caller among them); the first exception
// stops the others and is rethrown here.
template <class Scratch, class Row>
void for_each_row(int64_t rows, int64_t workers, const Scratch& prototype, const Row& row) {
  workers = std::min({workers, rows, kMaxThreads});
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    try {
      Scratch s = prototype;
      for (int64_t g = next++; g < rows && !failed; g = next++) row(g, s);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      failed = true;
    }
  };
  {
    std::vector<std::jthread> pool;  // joined on scope exit, also when a later thread fails to start
    for (int64_t t = 1; t < workers; ++t) pool.emplace_back(work);
    work();
  }
  if (error) std::rethrow_exception(error);
}

int64_t resolve_workers(const char* who, int threads) {
  check(threads >= 0, std::string(who) + ": threads must be >= 0 (0 = hardware concurrency), got " +
                          std::to_string(threads));
  return threads > 0 ? threads : int64_t(std::max(1u, std::thread::hardware_concurrency()));
}

// Query-block row (b, h, r) of a range mask: tile c is partial when some row's interval meets it, full when every
// row's interval covers it (the largest lo <= its first column, the smallest hi >= its last) and it has no padding.
void classify_range_row(const MaskRowRangeFn& range, BlockMask& bm, int64_t b, int64_t h, int64_t r,
                        RowScratch& s) {
  const int64_t q0 = r * bm.q_block, q1 = std::min(q0 + bm.q_block, bm.q_len);
  const bool q_tail = q0 + bm.q_block > bm.q_len;
  std::vector<int32_t>& starts = s.starts;  // per tile: rows whose interval begins there minus those that ended
  std::fill(starts.begin(), starts.end(), 0);
  int64_t max_lo = std::numeric_limits<int64_t>::min(), min_hi = std::numeric_limits<int64_t>::max();
  for (int64_t q = q0; q < q1; ++q) {
    const auto [lo, hi] = range(b, h, q);
    max_lo = std::max(max_lo, lo), min_hi = std::min(min_hi, hi);
    const int64_t a = std::max<int64_t>(lo, 0), z = std::min<int64_t>(hi, bm.kv_len - 1);
    if (a > z) continue;
    ++starts[size_t(a / bm.kv_block)];
    --starts[size_t(z / bm.kv_block + 1)];
  }
  const int64_t g = (b * bm.H + h) * bm.nq + r;
  int64_t open = 0;
  for (int64_t c = 0; c < bm.nkv; ++c) {
    open += starts[size_t(c)];
    const int64_t k0 = c * bm.kv_block, k1 = k0 + bm.kv_block;  // k1 > kv_len: padding, never full
    const bool full = !q_tail && k1 <= bm.kv_len && max_lo <= k0 && min_hi >= k1 - 1;
    s.member[size_t(c)] = open > 0 && !full;
    s.flags[size_t(c)] = full;
  }
  bm.kv_num_blocks[size_t(g)] = write_ordered_row(s.member.data(), bm.nkv, bm.kv_indices.data() + g * bm.nkv);
  bm.full_kv_num_blocks[size_t(g)] = write_ordered_row(s.flags.data(), bm.nkv, bm.full_kv_indices.data() + g * bm.nkv);
}

}  // namespace

BlockMask build_block_mask(const MaskRowFn& mask, int64_t B, int64_t H, int64_t q_len, int64_t kv_len, int q_block,
                           int kv_block, int threads) {
  const char* who = "build_block_mask";
  check(static_cast<bool>(mask), "build_block_mask: mask is empty; expected a callable");
  block_mask_detail::check_geometry(who, B, H, q_len, kv_len, q_block, kv_block);
  const int64_t workers = resolve_workers(who, threads);
  BlockMask bm = block_mask_detail::empty_like_geometry(B, H, q_len, kv_len, q_block, kv_block, true);
  RowScratch prototype;
  prototype.flags.resize(size_t(bm.nkv));
  prototype.member.resize(size_t(bm.nkv));
  prototype.values.resize(size_t(std::min<int64_t>(kv_block, kv_len)));
  for_each_row(B * H * bm.nq, workers, prototype, [&](int64_t g, RowScratch& s) {
    classify_row(mask, bm, g / bm.nq / H, g / bm.nq % H, g % bm.nq, s);
  });
  block_mask_detail::compute_q_side(bm);
  return bm;
}

BlockMask build_block_mask_from_ranges(const MaskRowRangeFn& range, int64_t B, int64_t H, int64_t q_len,
                                       int64_t kv_len, int q_block, int kv_block, int threads) {
  const char* who = "build_block_mask_from_ranges";
  check(static_cast<bool>(range), "build_block_mask_from_ranges: range is empty; expected a callable");
  block_mask_detail::check_geometry(who, B, H, q_len, kv_len, q_block, kv_block);
  // A thread below ~2^16 rows costs more to start than it saves (a row's bounds take ~0.1 us).
  const int64_t workers = std::min(resolve_workers(who, threads), B * H * q_len / 65536 + 1);
  BlockMask bm = block_mask_detail::empty_like_geometry(B, H, q_len, kv_len, q_block, kv_block, true);
  RowScratch prototype;
  prototype.flags.resize(size_t(bm.nkv));
  prototype.member.resize(size_t(bm.nkv));
  prototype.starts.resize(size_t(bm.nkv + 1));
  for_each_row(B * H * bm.nq, workers, prototype, [&](int64_t g, RowScratch& s) {
    classify_range_row(range, bm, g / bm.nq / H, g / bm.nq % H, g % bm.nq, s);
  });
  block_mask_detail::compute_q_side(bm);
  return bm;
}

BlockMask build_block_mask(const MaskFn& mask, int64_t B, int64_t H, int64_t q_len, int64_t kv_len, int q_block,
                           int kv_block, int threads) {
  check(static_cast<bool>(mask), "build_block_mask: mask is empty; expected a callable");
  MaskRowFn row = [&mask](int64_t b, int64_t h, int64_t q, int64_t k0, int64_t k1, uint8_t* out) {
    for (int64_t k = k0; k < k1; ++k) out[k - k0] = mask(b, h, q, k) ? 1 : 0;
  };
  return build_block_mask(row, B, H, q_len, kv_len, q_block, kv_block, threads);
}

}  // namespace flexattn
