// build_block_mask_from_ranges against the dense brute-force classification of the same intervals, plus its errors.
#include <atomic>
#include <stdexcept>
#include <utility>

#include "unit/block_mask/oracle.h"

namespace {

using namespace flexattn;
using bm_test::dense_classes;
using bm_test::expect_error;
using bm_test::hash4;

constexpr int64_t kOpen = int64_t(1) << 42;  // as far out as ir::kv_range's open bounds

struct NamedRange {
  std::string name;
  MaskRowRangeFn range;
};

// Interval masks that put bounds on, just before and just after tile edges, outside [0, kv_len), and empty rows.
std::vector<NamedRange> ranges(int kvb, int64_t kv_len) {
  auto edge = [kvb](uint64_t bits) { return int64_t(bits % 9) * kvb + int64_t(bits / 9 % 3) - 1; };
  return {
      {"causal", [](int64_t, int64_t, int64_t q) { return std::pair<int64_t, int64_t>{-kOpen, q}; }},
      {"sliding window kvb - 1",
       [kvb](int64_t, int64_t, int64_t q) { return std::pair<int64_t, int64_t>{q - (kvb - 1), q}; }},
      {"window aligned to tiles",
       [kvb](int64_t, int64_t, int64_t q) { return std::pair<int64_t, int64_t>{q / kvb * kvb, q / kvb * kvb + kvb - 1}; }},
      {"prefix 70 or causal", [](int64_t, int64_t, int64_t q) { return std::pair<int64_t, int64_t>{-kOpen, std::max<int64_t>(q, 69)}; }},
      {"everything", [](int64_t, int64_t, int64_t) { return std::pair<int64_t, int64_t>{-kOpen, kOpen}; }},
      {"nothing", [](int64_t, int64_t, int64_t) { return std::pair<int64_t, int64_t>{kOpen, -kOpen}; }},
      {"past the end", [kv_len](int64_t, int64_t, int64_t q) { return std::pair<int64_t, int64_t>{kv_len + q, kOpen}; }},
      {"random edges per (b, h, row)",
       [edge](int64_t b, int64_t h, int64_t q) {
         const uint64_t r = hash4(7, b, h, q, 0);
         if (r % 11 == 0) return std::pair<int64_t, int64_t>{5, 4};  // an empty row
         const int64_t lo = r % 5 == 0 ? -kOpen : edge(r >> 8), hi = r % 7 == 0 ? kOpen : lo + edge(r >> 24);
         return std::pair<int64_t, int64_t>{lo, hi};
       }},
      {"the same edges for 16 rows",
       [edge](int64_t b, int64_t h, int64_t q) {
         const uint64_t r = hash4(9, b, h, q / 16, 0);
         return std::pair<int64_t, int64_t>{edge(r), edge(r) + edge(r >> 20)};
       }},
  };
}

MaskFn as_mask(const MaskRowRangeFn& range) {
  return [range](int64_t b, int64_t h, int64_t q, int64_t kv) {
    const auto [lo, hi] = range(b, h, q);
    return lo <= kv && kv <= hi;
  };
}

void expect_matches_oracle(const NamedRange& r, int64_t B, int64_t H, int64_t q_len, int64_t kv_len, int qb, int kvb,
                           int threads) {
  SCOPED_TRACE(r.name + " B=" + std::to_string(B) + " H=" + std::to_string(H) + " q_len=" + std::to_string(q_len) +
               " kv_len=" + std::to_string(kv_len) + " block=(" + std::to_string(qb) + "," + std::to_string(kvb) +
               ") threads=" + std::to_string(threads));
  const BlockMask bm = build_block_mask_from_ranges(r.range, B, H, q_len, kv_len, qb, kvb, threads);
  ASSERT_EQ(bm.nq, (q_len + qb - 1) / qb);
  ASSERT_EQ(bm.nkv, (kv_len + kvb - 1) / kvb);
  ASSERT_TRUE(bm.has_full);
  ASSERT_NO_THROW(validate(bm));
  EXPECT_EQ(to_dense(bm), dense_classes(as_mask(r.range), B, H, q_len, kv_len, qb, kvb));
  // Array for array what the per-entry builder gives (the same ordered rows, the same transposes).
  bm_test::expect_same_arrays(bm, build_block_mask(as_mask(r.range), B, H, q_len, kv_len, qb, kvb, 1));
}

TEST(BuildBlockMaskFromRanges, MatchesTheDenseOracle) {
  const std::pair<int, int> blocks[] = {{16, 16}, {64, 64}, {16, 64}, {64, 16}, {128, 128}};
  const std::pair<int64_t, int64_t> lengths[] = {{1, 1}, {17, 17}, {127, 129}, {129, 127}, {300, 1000}, {1000, 300}};
  for (const auto& [qb, kvb] : blocks)
    for (const auto& [q_len, kv_len] : lengths)
      for (const NamedRange& r : ranges(kvb, kv_len)) expect_matches_oracle(r, 2, 3, q_len, kv_len, qb, kvb, 2);
}

TEST(BuildBlockMaskFromRanges, EveryClassAppears) {  // the sweep is not vacuous
  int64_t partial = 0, full = 0;
  for (const NamedRange& r : ranges(16, 300)) {
    const BlockMask bm = build_block_mask_from_ranges(r.range, 2, 3, 300, 300, 16, 16);
    for (int32_t n : bm.kv_num_blocks) partial += n;
    for (int32_t n : bm.full_kv_num_blocks) full += n;
  }
  EXPECT_GT(partial, 100);
  EXPECT_GT(full, 100);
}

TEST(BuildBlockMaskFromRanges, ThreadCountDoesNotChangeTheResult) {
  const NamedRange r = ranges(64, 70000)[7];  // random edges; 2 * 70000 rows: several threads start
  bm_test::expect_same_arrays(build_block_mask_from_ranges(r.range, 2, 1, 70000, 700, 64, 64, 4),
                              build_block_mask_from_ranges(r.range, 2, 1, 70000, 700, 64, 64, 1));
}

TEST(BuildBlockMaskFromRanges, OneCallPerRowAndRethrows) {
  std::atomic<int64_t> calls{0};
  const MaskRowRangeFn counted = [&](int64_t, int64_t, int64_t q) {
    ++calls;
    return std::pair<int64_t, int64_t>{0, q};
  };
  build_block_mask_from_ranges(counted, 2, 3, 1000, 500, 64, 64, 1);
  EXPECT_EQ(calls.load(), 2 * 3 * 1000);
  const MaskRowRangeFn boom = [](int64_t, int64_t, int64_t q) -> std::pair<int64_t, int64_t> {
    if (q == 150) throw std::runtime_error("range exploded at q=150");
    return {0, q};
  };
  for (int threads : {1, 4}) {
    try {
      build_block_mask_from_ranges(boom, 1, 1, 300, 300, 64, 64, threads);
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "range exploded at q=150");
    }
  }
}

TEST(BuildBlockMaskFromRanges, ErrorsNameTheArgument) {
  const MaskRowRangeFn ok = [](int64_t, int64_t, int64_t q) { return std::pair<int64_t, int64_t>{0, q}; };
  expect_error([&] { build_block_mask_from_ranges(ok, 0, 1, 8, 8, 4, 4); },
               "build_block_mask_from_ranges: B must be >= 1, got 0");
  expect_error([&] { build_block_mask_from_ranges(ok, 1, 1, 8, 8, 4, -4); },
               "build_block_mask_from_ranges: kv_block must be >= 1, got -4");
  expect_error([&] { build_block_mask_from_ranges(ok, 1, 1, 8, 8, 4, 4, -1); },
               "build_block_mask_from_ranges: threads must be >= 0 (0 = hardware concurrency), got -1");
  expect_error([&] { build_block_mask_from_ranges(MaskRowRangeFn(), 1, 1, 8, 8, 4, 4); },
               "build_block_mask_from_ranges: range is empty");
}

}  // namespace
