// build_block_mask: tile classification by evaluating the mask row by row, spread over std::threads.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
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

}  // namespace

BlockMask build_block_mask(const MaskRowFn& mask, int64_t B, int64_t H, int64_t q_len, int64_t kv_len, int q_block,
                           int kv_block, int threads) {
  const char* who = "build_block_mask";
  check(static_cast<bool>(mask), "build_block_mask: mask is empty; expected a callable");
  block_mask_detail::check_geometry(who, B, H, q_len, kv_len, q_block, kv_block);
  check(threads >= 0, "build_block_mask: threads must be >= 0 (0 = hardware concurrency), got " +
                          std::to_string(threads));
  BlockMask bm = block_mask_detail::empty_like_geometry(B, H, q_len, kv_len, q_block, kv_block, true);

  const int64_t rows = B * H * bm.nq;
  int64_t workers = threads > 0 ? threads : int64_t(std::max(1u, std::thread::hardware_concurrency()));
  workers = std::min({workers, rows, kMaxThreads});
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    RowScratch s;
    try {
      s.flags.resize(size_t(bm.nkv));
      s.member.resize(size_t(bm.nkv));
      s.values.resize(size_t(std::min<int64_t>(kv_block, kv_len)));
      for (int64_t g = next++; g < rows && !failed; g = next++)
        classify_row(mask, bm, g / bm.nq / H, g / bm.nq % H, g % bm.nq, s);
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
