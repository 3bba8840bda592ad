// from_kv_blocks (transposition, round trip) and validate, with every error message.
#include "unit/block_mask/oracle.h"

namespace {

using namespace flexattn;
using bm_test::expect_error;
using V = std::vector<int32_t>;

// nq = 2 rows, nkv = 3 cols, 4x4 blocks. Row 0: partial {2, 0}, full {1}; row 1: partial {1}, no full.
// Entries past each count are garbage on purpose: torch leaves them unspecified.
struct Small {
  V num{2, 1}, idx{2, 0, 99, 1, -5, 7};
  V full_num{1, 0}, full_idx{1, 0, 0, 0, 0, 0};
  BlockMask make() const { return from_kv_blocks(num, idx, &full_num, &full_idx, 1, 1, 2, 3, 4, 4); }
};

TEST(FromKvBlocks, TransposesHandExample) {
  const BlockMask bm = Small().make();
  EXPECT_EQ(bm.q_len, 8);  // torch's default seq_lengths: rows * Q_BLOCK, cols * KV_BLOCK
  EXPECT_EQ(bm.kv_len, 12);
  EXPECT_TRUE(bm.has_full);
  EXPECT_EQ(bm.kv_indices, (V{2, 0, 99, 1, -5, 7}));  // kept as given
  EXPECT_EQ(bm.q_num_blocks, (V{1, 1, 1}));
  EXPECT_EQ(bm.q_indices, (V{0, 1, 1, 0, 0, 1}));
  EXPECT_EQ(bm.full_q_num_blocks, (V{0, 1, 0}));
  EXPECT_EQ(bm.full_q_indices, (V{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(to_dense(bm), (std::vector<uint8_t>{1, 2, 1, 0, 1, 0}));
  EXPECT_NO_THROW(validate(bm));
}

TEST(FromKvBlocks, WithoutFullBlocks) {
  const Small s;
  const BlockMask bm = from_kv_blocks(s.num, s.idx, nullptr, nullptr, 1, 1, 2, 3, 4, 4, 7, 9);
  EXPECT_FALSE(bm.has_full);
  EXPECT_TRUE(bm.full_kv_num_blocks.empty() && bm.full_q_num_blocks.empty() && bm.full_q_indices.empty());
  EXPECT_EQ(bm.q_len, 7);
  EXPECT_EQ(bm.kv_len, 9);
  EXPECT_EQ(bm.q_num_blocks, (V{1, 1, 1}));
  EXPECT_EQ(to_dense(bm), (std::vector<uint8_t>{1, 0, 1, 0, 1, 0}));
  EXPECT_NO_THROW(validate(bm));
}

TEST(FromKvBlocks, RoundTripOfBuiltMasks) {
  for (const auto& [name, fn] : bm_test::sweep_masks(32, 16)) {
    const BlockMask a = build_block_mask(fn, 2, 1, 200, 150, 32, 16, 2);
    const BlockMask b = from_kv_blocks(a.kv_num_blocks, a.kv_indices, &a.full_kv_num_blocks, &a.full_kv_indices, a.B,
                                       a.H, a.nq, a.nkv, a.q_block, a.kv_block, a.q_len, a.kv_len);
    SCOPED_TRACE(name);
    bm_test::expect_same_arrays(b, a);
  }
}

TEST(FromKvBlocks, Errors) {
  const Small s;
  const auto call = [&](V num, V idx, const V* fn, const V* fi, int64_t B = 1, int64_t H = 1, int64_t nq = 2,
                        int64_t nkv = 3, int qb = 4, int kvb = 4, int64_t q_len = -1, int64_t kv_len = -1) {
    from_kv_blocks(num, idx, fn, fi, B, H, nq, nkv, qb, kvb, q_len, kv_len);
  };
  const std::string p = "from_kv_blocks: ";
  expect_error([&] { call(s.num, s.idx, &s.full_num, nullptr); },
               p + "full_kv_num_blocks and full_kv_indices must both be given or both be null");
  expect_error([&] { call(s.num, s.idx, nullptr, &s.full_idx); }, p + "full_kv_num_blocks and full_kv_indices");
  expect_error([&] { call(s.num, s.idx, nullptr, nullptr, 1, 1, 0); }, p + "nq must be >= 1, got 0");
  expect_error([&] { call(s.num, s.idx, nullptr, nullptr, 1, 1, 2, -3); }, p + "nkv_cols must be >= 1, got -3");
  expect_error([&] { call(s.num, s.idx, nullptr, nullptr, 1, 1, 2, 3, 4, 4, 0); },
               p + "q_len must be >= 1 or -1 (= nq * q_block), got 0");
  expect_error([&] { call(s.num, s.idx, nullptr, nullptr, 1, 1, 2, 3, 4, 4, -1, -7); },
               p + "kv_len must be >= 1 or -1 (= nkv_cols * kv_block), got -7");
  expect_error([&] { call(s.num, s.idx, nullptr, nullptr, 1, 1, 2, 3, 0); }, p + "q_block must be >= 1, got 0");
  expect_error([&] { call(s.num, s.idx, nullptr, nullptr, 1, 1, 2, 3, 4, 0); }, p + "kv_block must be >= 1, got 0");
  expect_error([&] { call(s.num, s.idx, nullptr, nullptr, 0); }, p + "B must be >= 1, got 0");
  expect_error([&] { call(s.num, s.idx, nullptr, nullptr, 1, 0); }, p + "H must be >= 1, got 0");
  expect_error([&] { call(s.num, s.idx, nullptr, nullptr, 1, 1, 2, 3, 4, 4, 9); },
               p + "nq = 2 does not match q_len = 9; expected ceil(q_len / q_block) = ceil(9 / 4) = 3");
  expect_error([&] { call(s.num, s.idx, nullptr, nullptr, 1, 1, 2, 3, 4, 4, -1, 8); },
               p + "nkv = 3 does not match kv_len = 8; expected ceil(kv_len / kv_block) = ceil(8 / 4) = 2");
  expect_error([&] { call(V{1}, s.idx, nullptr, nullptr); }, p + "kv_num_blocks has 1 elements; expected B*H*nq = 2");
  expect_error([&] { call(s.num, V{0, 1}, nullptr, nullptr); }, p + "kv_indices has 2 elements; expected B*H*nq*nkv = 6");
  const V short_num{0};
  expect_error([&] { call(s.num, s.idx, &short_num, &s.full_idx); },
               p + "full_kv_num_blocks has 1 elements; expected B*H*nq = 2");
  const V short_idx{0};
  expect_error([&] { call(s.num, s.idx, &s.full_num, &short_idx); },
               p + "full_kv_indices has 1 elements; expected B*H*nq*nkv = 6");
  expect_error([&] { call(V{4, 0}, s.idx, nullptr, nullptr); },
               p + "kv_num_blocks[0,0,0] = 4 is out of range; expected 0 <= value <= nkv = 3");
  expect_error([&] { call(V{0, -1}, s.idx, nullptr, nullptr); },
               p + "kv_num_blocks[0,0,1] = -1 is out of range; expected 0 <= value <= nkv = 3");
  expect_error([&] { call(V{2, 1}, V{0, 3, 0, 0, 0, 0}, nullptr, nullptr); },
               p + "kv_indices[0,0,0][1] = 3 is out of range; expected 0 <= value < nkv = 3");
  expect_error([&] { call(V{2, 1}, V{0, 1, 0, -1, 0, 0}, nullptr, nullptr); },
               p + "kv_indices[0,0,1][0] = -1 is out of range; expected 0 <= value < nkv = 3");
  expect_error([&] { call(V{3, 1}, V{2, 0, 2, 1, 0, 0}, nullptr, nullptr); },
               p + "kv_indices[0,0,0] lists block 2 twice; expected distinct indices among the first 3");
  const V bad_full_num{0, 5};
  expect_error([&] { call(s.num, s.idx, &bad_full_num, &s.full_idx); },
               p + "full_kv_num_blocks[0,0,1] = 5 is out of range; expected 0 <= value <= nkv = 3");
  const V bad_full_idx{7, 0, 0, 0, 0, 0};
  expect_error([&] { call(s.num, s.idx, &s.full_num, &bad_full_idx); },
               p + "full_kv_indices[0,0,0][0] = 7 is out of range; expected 0 <= value < nkv = 3");
  const V dup_full_num{0, 2}, dup_full_idx{0, 0, 0, 2, 2, 0};
  expect_error([&] { call(s.num, s.idx, &dup_full_num, &dup_full_idx); },
               p + "full_kv_indices[0,0,1] lists block 2 twice");
  const V overlap_idx{2, 0, 0, 0, 0, 0};
  expect_error([&] { call(s.num, s.idx, &s.full_num, &overlap_idx); },
               p + "block 2 of row [0,0,0] is in both kv_indices and full_kv_indices; expected disjoint partial and "
                   "full sets");
  // Multi-index decoding: B = 2, H = 2, the bad row is b = 1, h = 0, row 1.
  V num4(8, 0), idx4(24, 0);
  num4[5] = 9;
  expect_error([&] { call(num4, idx4, nullptr, nullptr, 2, 2); }, p + "kv_num_blocks[1,0,1] = 9 is out of range");
}

TEST(Validate, AcceptsBuiltAndReorderedMasks) {
  // Causal, 4x4 tiles: kv row 3 has full blocks {0, 1, 2}; q column 0 has full rows {1, 2, 3}.
  BlockMask bm = build_block_mask(bm_test::sweep_masks(16, 16)[0].fn, 1, 2, 64, 64, 16, 16);
  EXPECT_NO_THROW(validate(bm));
  ASSERT_EQ(bm.full_kv_num_blocks[3], 3);
  ASSERT_EQ(bm.full_q_num_blocks[0], 3);
  // Order within the first count entries is free on both sides (only torch's builder sorts them).
  std::swap(bm.full_kv_indices[3 * 4 + 0], bm.full_kv_indices[3 * 4 + 2]);
  std::swap(bm.full_q_indices[0], bm.full_q_indices[1]);
  EXPECT_NO_THROW(validate(bm));
}

TEST(Validate, Errors) {
  const BlockMask good = build_block_mask(bm_test::sweep_masks(16, 16)[0].fn, 1, 1, 48, 48, 16, 16);
  ASSERT_NO_THROW(validate(good));
  const auto bad = [&](auto mutate, const std::string& msg) {
    BlockMask bm = good;
    mutate(bm);
    expect_error([&] { validate(bm); }, "validate: " + msg);
  };
  bad([](BlockMask& m) { m.B = 0; }, "B must be >= 1, got 0");
  bad([](BlockMask& m) { m.kv_block = 0; }, "kv_block must be >= 1, got 0");
  bad([](BlockMask& m) { m.nq = 4; }, "nq = 4 does not match q_len = 48; expected ceil(q_len / q_block) = ceil(48 / 16) = 3");
  bad([](BlockMask& m) { m.kv_len = 100; }, "nkv = 3 does not match kv_len = 100");
  bad([](BlockMask& m) { m.kv_indices.pop_back(); }, "kv_indices has 8 elements; expected B*H*nq*nkv = 9");
  bad([](BlockMask& m) { m.full_kv_num_blocks.clear(); }, "full_kv_num_blocks has 0 elements; expected B*H*nq = 3");
  bad([](BlockMask& m) { m.has_full = false; },
      "full_kv_num_blocks/full_kv_indices are set but has_full is false; expected empty vectors or has_full = true");
  bad([](BlockMask& m) { m.kv_num_blocks[1] = 4; }, "kv_num_blocks[0,0,1] = 4 is out of range");
  bad([](BlockMask& m) { m.full_kv_indices[3] = 1; }, "block 1 of row [0,0,1] is in both kv_indices and full_kv_indices");
  bad([](BlockMask& m) { m.q_num_blocks.clear(); },
      "q_num_blocks has 0 elements; expected B*H*nkv = 3 (from_kv_blocks computes the transposes)");
  bad([](BlockMask& m) { m.q_indices.resize(4); }, "q_indices has 4 elements; expected B*H*nkv*nq = 9");
  bad([](BlockMask& m) { m.full_q_indices.resize(4); }, "full_q_indices has 4 elements; expected B*H*nkv*nq = 9");
  bad([](BlockMask& m) { m.full_q_num_blocks.resize(1); }, "full_q_num_blocks has 1 elements; expected B*H*nkv = 3");
  bad(
      [](BlockMask& m) {
        m.has_full = false;
        m.full_kv_num_blocks.clear(), m.full_kv_indices.clear();
      },
      "full_q_num_blocks/full_q_indices are set but has_full is false");
  bad([](BlockMask& m) { m.q_num_blocks[0] = -1; }, "q_num_blocks[0,0,0] = -1 is out of range; expected 0 <= value <= nq = 3");
  bad([](BlockMask& m) { m.q_indices[0] = 3; }, "q_indices[0,0,0][0] = 3 is out of range; expected 0 <= value < nq = 3");
  bad([](BlockMask& m) { m.full_q_indices[1] = m.full_q_indices[0]; }, "full_q_indices[0,0,0] lists block 1 twice");
  bad([](BlockMask& m) { m.q_num_blocks[1] = 0; },
      "q_num_blocks/q_indices[0,0,1] is not the transpose of kv_num_blocks/kv_indices; expected the query blocks whose "
      "row lists kv block 1");
  bad([](BlockMask& m) { m.q_indices[3] = 2; }, "q_num_blocks/q_indices[0,0,1] is not the transpose");
  bad([](BlockMask& m) { m.full_q_num_blocks[2] = 1; },
      "full_q_num_blocks/full_q_indices[0,0,2] is not the transpose of full_kv_num_blocks/full_kv_indices");
}

}  // namespace
