// build_block_mask against a dense brute-force classification (torch's algorithm), plus its errors.
#include <atomic>
#include <stdexcept>

#include "unit/block_mask/oracle.h"

namespace {

using namespace flexattn;
using bm_test::dense_classes;
using bm_test::expect_error;

struct BlockPair {
  int qb, kvb;
};
const BlockPair kBlockPairs[] = {{16, 16}, {64, 64}, {128, 128}, {16, 64}, {128, 16}, {64, 128}};

void expect_matches_oracle(const MaskFn& m, int64_t B, int64_t H, int64_t q_len, int64_t kv_len, int qb, int kvb,
                           int threads, const std::string& what) {
  SCOPED_TRACE(what + " B=" + std::to_string(B) + " H=" + std::to_string(H) + " q_len=" + std::to_string(q_len) +
               " kv_len=" + std::to_string(kv_len) + " block=(" + std::to_string(qb) + "," + std::to_string(kvb) + ")");
  const BlockMask bm = build_block_mask(m, B, H, q_len, kv_len, qb, kvb, threads);
  ASSERT_EQ(bm.nq, (q_len + qb - 1) / qb);
  ASSERT_EQ(bm.nkv, (kv_len + kvb - 1) / kvb);
  ASSERT_TRUE(bm.has_full);
  ASSERT_NO_THROW(validate(bm));
  EXPECT_EQ(to_dense(bm), dense_classes(m, B, H, q_len, kv_len, qb, kvb));
  bm_test::expect_torch_ordering(bm.kv_num_blocks, bm.kv_indices, bm.nkv, "kv_indices");
  bm_test::expect_torch_ordering(bm.full_kv_num_blocks, bm.full_kv_indices, bm.nkv, "full_kv_indices");
  bm_test::expect_torch_ordering(bm.q_num_blocks, bm.q_indices, bm.nq, "q_indices");
  bm_test::expect_torch_ordering(bm.full_q_num_blocks, bm.full_q_indices, bm.nq, "full_q_indices");
}

TEST(BuildBlockMask, MatchesDenseOracleOnEqualLengths) {
  for (const BlockPair& bp : kBlockPairs)
    for (const auto& [name, fn] : bm_test::sweep_masks(bp.qb, bp.kvb))
      for (int64_t len : {1, 17, 127, 128, 129, 1000}) expect_matches_oracle(fn, 1, 1, len, len, bp.qb, bp.kvb, 2, name);
}

TEST(BuildBlockMask, MatchesDenseOracleOnUnequalLengths) {
  const std::pair<int64_t, int64_t> lens[] = {{1, 1000}, {1000, 1}, {17, 129}, {129, 127}, {128, 1000}, {1000, 127}};
  for (const BlockPair& bp : {BlockPair{16, 64}, BlockPair{128, 16}, BlockPair{64, 64}})
    for (const auto& [name, fn] : bm_test::sweep_masks(bp.qb, bp.kvb))
      for (const auto& [q, kv] : lens) expect_matches_oracle(fn, 1, 1, q, kv, bp.qb, bp.kvb, 2, name);
}

TEST(BuildBlockMask, BatchAndHeadDependentMask) {
  const MaskFn m = [](int64_t b, int64_t h, int64_t q, int64_t k) { return q + 40 * b >= k + 25 * h; };
  expect_matches_oracle(m, 2, 3, 200, 300, 64, 32, 3, "b/h shifted causal");
  const BlockMask bm = build_block_mask(m, 2, 3, 200, 300, 64, 32, 1);
  const size_t per_bh = size_t(bm.nq * bm.nkv);
  const std::vector<uint8_t> d = to_dense(bm);
  // Different (b, h) really are different masks (the kernels index b % B, h % H).
  EXPECT_FALSE(std::equal(d.begin(), d.begin() + per_bh, d.begin() + per_bh));
  EXPECT_FALSE(std::equal(d.begin(), d.begin() + per_bh, d.begin() + 3 * per_bh));
}

TEST(BuildBlockMask, BroadcastBatchHeadEqualsEveryPair) {
  const MaskFn causal = [](int64_t, int64_t, int64_t q, int64_t k) { return q >= k; };
  const BlockMask one = build_block_mask(causal, 1, 1, 300, 300, 64, 64);
  const BlockMask many = build_block_mask(causal, 2, 3, 300, 300, 64, 64);
  EXPECT_EQ(one.B, 1);
  EXPECT_EQ(one.H, 1);
  const std::vector<uint8_t> d1 = to_dense(one), dm = to_dense(many);
  ASSERT_EQ(dm.size(), 6 * d1.size());
  for (size_t g = 0; g < 6; ++g) EXPECT_TRUE(std::equal(d1.begin(), d1.end(), dm.begin() + g * d1.size())) << g;
}

TEST(BuildBlockMask, TailTilesAreNeverFull) {
  const MaskFn all = [](int64_t, int64_t, int64_t, int64_t) { return true; };
  const BlockMask bm = build_block_mask(all, 1, 1, 129, 100, 64, 64);
  // nq = 3 (rows 128.. are a tail), nkv = 2 (cols 64..99 are a tail): only tile (0,0) and (1,0) are full.
  const std::vector<uint8_t> want = {2, 1, 2, 1, 1, 1};
  EXPECT_EQ(to_dense(bm), want);
  const BlockMask exact = build_block_mask(all, 1, 1, 128, 128, 64, 64);
  EXPECT_EQ(to_dense(exact), std::vector<uint8_t>(4, 2));
}

TEST(BuildBlockMask, ThreadCountDoesNotChangeResult) {
  const MaskFn m = bm_test::sweep_masks(32, 16)[5].fn;
  const BlockMask a = build_block_mask(m, 2, 2, 333, 257, 32, 16, 1);
  for (int t : {0, 2, 3, 7, 1000}) {
    const BlockMask b = build_block_mask(m, 2, 2, 333, 257, 32, 16, t);
    EXPECT_EQ(a.kv_num_blocks, b.kv_num_blocks) << t;
    EXPECT_EQ(a.kv_indices, b.kv_indices) << t;
    EXPECT_EQ(a.full_kv_num_blocks, b.full_kv_num_blocks) << t;
    EXPECT_EQ(a.full_kv_indices, b.full_kv_indices) << t;
    EXPECT_EQ(a.q_indices, b.q_indices) << t;
    EXPECT_EQ(a.full_q_indices, b.full_q_indices) << t;
  }
}

TEST(BuildBlockMask, RowFnCalledWithinOneTileAndInsideLengths) {
  std::atomic<int> bad{0}, calls{0};
  const MaskRowFn row = [&](int64_t b, int64_t h, int64_t q, int64_t k0, int64_t k1, uint8_t* out) {
    ++calls;
    if (b != 0 || h < 0 || h >= 2 || q < 0 || q >= 77 || k0 % 16 != 0 || k1 <= k0 || k1 - k0 > 16 || k1 > 70) ++bad;
    for (int64_t k = k0; k < k1; ++k) out[k - k0] = q >= k;
  };
  const BlockMask bm = build_block_mask(row, 1, 2, 77, 70, 32, 16, 2);
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(calls.load(), 0);
  const MaskFn causal = [](int64_t, int64_t, int64_t q, int64_t k) { return q >= k; };
  EXPECT_EQ(to_dense(bm), dense_classes(causal, 1, 2, 77, 70, 32, 16));
}

TEST(BuildBlockMask, DecidedTilesAreNotEvaluatedAgain) {
  // A checkerboard makes every tile partial after its first row, so evaluation stops after one row.
  std::atomic<int64_t> evaluated{0};
  const MaskFn checker = [&](int64_t, int64_t, int64_t q, int64_t k) {
    ++evaluated;
    return (q + k) % 2 == 0;
  };
  build_block_mask(checker, 1, 1, 256, 256, 64, 64, 1);
  EXPECT_EQ(evaluated.load(), 4 * 256);  // 4 tile rows x first query row x 256 columns
}

TEST(BuildBlockMask, RowFnThatWritesNothingReadsAsFalse) {
  const MaskRowFn lazy = [](int64_t, int64_t, int64_t, int64_t, int64_t, uint8_t*) {};
  const BlockMask bm = build_block_mask(lazy, 1, 1, 100, 100, 32, 32, 2);
  EXPECT_EQ(to_dense(bm), std::vector<uint8_t>(16, 0));
}

TEST(BuildBlockMask, RethrowsExceptionFromMask) {
  const MaskFn boom = [](int64_t, int64_t, int64_t q, int64_t) -> bool {
    if (q == 150) throw std::runtime_error("mask exploded at q=150");
    return true;
  };
  for (int threads : {1, 4}) {
    try {
      build_block_mask(boom, 1, 1, 300, 300, 64, 64, threads);
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "mask exploded at q=150");
    }
  }
}

TEST(BuildBlockMask, ErrorsNameTheArgument) {
  const MaskFn ok = [](int64_t, int64_t, int64_t, int64_t) { return true; };
  expect_error([&] { build_block_mask(ok, 0, 1, 8, 8, 4, 4); }, "build_block_mask: B must be >= 1, got 0");
  expect_error([&] { build_block_mask(ok, 1, -2, 8, 8, 4, 4); }, "build_block_mask: H must be >= 1, got -2");
  expect_error([&] { build_block_mask(ok, 1, 1, 0, 8, 4, 4); }, "build_block_mask: q_len must be >= 1, got 0");
  expect_error([&] { build_block_mask(ok, 1, 1, 8, -1, 4, 4); }, "build_block_mask: kv_len must be >= 1, got -1");
  expect_error([&] { build_block_mask(ok, 1, 1, 8, 8, 0, 4); }, "build_block_mask: q_block must be >= 1, got 0");
  expect_error([&] { build_block_mask(ok, 1, 1, 8, 8, 4, -4); }, "build_block_mask: kv_block must be >= 1, got -4");
  expect_error([&] { build_block_mask(ok, 1, 1, 8, 8, 4, 4, -1); },
               "build_block_mask: threads must be >= 0 (0 = hardware concurrency), got -1");
  expect_error([&] { build_block_mask(MaskFn(), 1, 1, 8, 8, 4, 4); }, "build_block_mask: mask is empty");
  expect_error([&] { build_block_mask(MaskRowFn(), 1, 1, 8, 8, 4, 4); }, "build_block_mask: mask is empty");
  expect_error([&] { build_block_mask(ok, 1, 1, int64_t(1) << 40, 8, 1, 4); },
               "build_block_mask: q_len / q_block gives more than 2^31-1 query blocks");
  expect_error([&] { build_block_mask(ok, 1, 1, 8, int64_t(1) << 40, 4, 1); },
               "build_block_mask: kv_len / kv_block gives more than 2^31-1 kv blocks");
  expect_error([&] { build_block_mask(ok, int64_t(1) << 40, int64_t(1) << 40, 8, 8, 4, 4); },
               "build_block_mask: B*H is too large");
  expect_error([&] { build_block_mask(ok, int64_t(1) << 30, 1 << 20, 1 << 20, 8, 1, 4); },
               "build_block_mask: B*H*nq is too large");
}

}  // namespace
