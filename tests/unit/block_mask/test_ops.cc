// Stats, sparsity, slicing and AND / OR of block masks.
#include "unit/block_mask/oracle.h"

namespace {

using namespace flexattn;
using bm_test::dense_classes;
using bm_test::expect_error;

const MaskFn kCausal = [](int64_t, int64_t, int64_t q, int64_t k) { return q >= k; };

TEST(Stats, CountsAndSparsityOnBlockMultiples) {
  // 4x4 tiles of a causal mask: 6 full, 4 partial (diagonal), 6 skipped.
  const BlockMask bm = build_block_mask(kCausal, 1, 1, 512, 512, 128, 128);
  const BlockMaskStats st = block_mask_stats(bm);
  EXPECT_EQ(st.full, 6);
  EXPECT_EQ(st.partial, 4);
  EXPECT_EQ(st.skipped, 6);
  EXPECT_EQ(st.total, 16);
  EXPECT_DOUBLE_EQ(sparsity(bm), 37.5);
  EXPECT_DOUBLE_EQ(torch_sparsity(bm), 37.5);  // torch's formula agrees when there is no tail
}

TEST(Stats, SparsityWithTailTilesAndWithoutFull) {
  // 129 x 129, block 128: tiles (0,0) diagonal, (0,1) skipped, (1,0) and (1,1) tails => 3 partial, 1 skipped.
  const BlockMask bm = build_block_mask(kCausal, 1, 1, 129, 129, 128, 128);
  const BlockMaskStats st = block_mask_stats(bm);
  EXPECT_EQ(st.partial, 3);
  EXPECT_EQ(st.full, 0);
  EXPECT_DOUBLE_EQ(sparsity(bm), 25.0);
  // torch divides computed block area by the unpadded element count: 100 * (1 - 3*128*128 / 129^2) < 0.
  EXPECT_DOUBLE_EQ(torch_sparsity(bm), 100.0 * (1.0 - 3.0 * 128 * 128 / (129.0 * 129.0)));
  const BlockMask nofull = from_kv_blocks(bm.kv_num_blocks, bm.kv_indices, nullptr, nullptr, 1, 1, 2, 2, 128, 128);
  EXPECT_EQ(block_mask_stats(nofull).full, 0);
  EXPECT_EQ(block_mask_stats(nofull).partial, 3);
}

TEST(Stats, RejectsMalformedMask) {
  BlockMask bm = build_block_mask(kCausal, 1, 1, 64, 64, 16, 16);
  bm.kv_num_blocks.pop_back();
  expect_error([&] { sparsity(bm); }, "block_mask_stats: kv_num_blocks has 3 elements; expected B*H*nq = 4");
}

TEST(RowOrder, MostKvBlocksFirstTiesLastRowFirstPerBatchAndHead) {
  // Causal 4x4 tiles: row r has r + 1 blocks (r partial-or-full), so the order is 3 2 1 0.
  EXPECT_EQ(block_mask_row_order(build_block_mask(kCausal, 1, 1, 512, 512, 128, 128)),
            (std::vector<int32_t>{3, 2, 1, 0}));
  // Two documents [0, 384) and [384, 512), causal inside, per batch: b = 1 reverses the documents.
  const MaskFn docs = [](int64_t b, int64_t, int64_t q, int64_t k) {
    auto doc = [&](int64_t i) { return (b == 0 ? i : 511 - i) < 384; };
    return doc(q) == doc(k) && (b == 0 ? q >= k : q <= k);
  };
  const BlockMask bm = build_block_mask(docs, 2, 1, 512, 512, 128, 128);
  // b = 0: rows hold 1, 2, 3, 1 blocks; b = 1 (anti-causal, mirrored): 1, 3, 2, 1. Ties keep the natural order,
  // last row first.
  EXPECT_EQ(block_mask_row_order(bm), (std::vector<int32_t>{2, 1, 3, 0, 1, 2, 3, 0}));
  // A sliding window: every row but the first ties, so the order is the natural one (last row first).
  const MaskFn window = [](int64_t, int64_t, int64_t q, int64_t k) { return q >= k && q - k < 256; };
  EXPECT_EQ(block_mask_row_order(build_block_mask(window, 1, 1, 768, 768, 128, 128)),
            (std::vector<int32_t>{5, 4, 3, 2, 1, 0}));
  // A malformed mask is refused, not ordered.
  BlockMask bad = build_block_mask(kCausal, 1, 1, 512, 512, 128, 128);
  bad.kv_num_blocks[0] = 1000;
  expect_error([&] { block_mask_row_order(bad); },
               "block_mask_row_order: kv_num_blocks[0,0,0] = 1000 is out of range; expected 0 <= value <= nkv = 4");
}

TEST(SliceQBlocks, MatchesRowsOfTheOriginal) {
  const MaskFn m = bm_test::sweep_masks(32, 32)[5].fn;
  const BlockMask bm = build_block_mask(m, 2, 2, 300, 200, 32, 32);  // nq = 10 (tail of 12 rows), nkv = 7
  const std::vector<uint8_t> full = to_dense(bm);
  const std::pair<int64_t, int64_t> ranges[] = {{0, 10}, {0, 1}, {3, 4}, {2, 7}, {9, 10}, {4, 10}};
  for (const auto& [r0, r1] : ranges) {
    SCOPED_TRACE(std::to_string(r0) + ":" + std::to_string(r1));
    const BlockMask s = slice_q_blocks(bm, r0, r1);
    ASSERT_NO_THROW(validate(s));
    EXPECT_EQ(s.nq, r1 - r0);
    EXPECT_EQ(s.q_len, std::min<int64_t>(300, r1 * 32) - r0 * 32);
    EXPECT_EQ(s.kv_len, 200);
    const std::vector<uint8_t> d = to_dense(s);
    for (int64_t g = 0; g < 4; ++g)
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = 0; c < 7; ++c)
          ASSERT_EQ(d[size_t((g * s.nq + r - r0) * 7 + c)], full[size_t((g * 10 + r) * 7 + c)]) << g << " " << r << " " << c;
  }
}

TEST(SliceQBlocks, DecodeRowWithoutFull) {
  const BlockMask base = build_block_mask(kCausal, 1, 1, 256, 256, 64, 64);
  const BlockMask nofull = from_kv_blocks(base.kv_num_blocks, base.kv_indices, nullptr, nullptr, 1, 1, 4, 4, 64, 64);
  const BlockMask s = slice_q_blocks(nofull, 2, 3);  // bm[:, :, pos // 64] for pos in [128, 192)
  EXPECT_FALSE(s.has_full);
  EXPECT_EQ(s.q_len, 64);
  EXPECT_EQ(to_dense(s), (std::vector<uint8_t>{0, 0, 1, 0}));
  EXPECT_EQ(s.q_num_blocks, (std::vector<int32_t>{0, 0, 1, 0}));
}

TEST(SliceQBlocks, Errors) {
  const BlockMask bm = build_block_mask(kCausal, 1, 1, 64, 64, 16, 16);
  const std::string msg = "are not a non-empty range of query-block rows; expected 0 <= row_begin < row_end <= nq = 4";
  expect_error([&] { slice_q_blocks(bm, -1, 2); }, "slice_q_blocks: rows [-1, 2) " + msg);
  expect_error([&] { slice_q_blocks(bm, 2, 2); }, "slice_q_blocks: rows [2, 2) " + msg);
  expect_error([&] { slice_q_blocks(bm, 3, 5); }, "slice_q_blocks: rows [3, 5) " + msg);
}

// Applies the tile rule to oracle classes: the exact expected result of and/or_block_masks.
std::vector<uint8_t> rule(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, bool is_and) {
  std::vector<uint8_t> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (is_and) out[i] = (a[i] == 0 || b[i] == 0) ? 0 : (a[i] == 2 && b[i] == 2) ? 2 : 1;
    else out[i] = (a[i] == 2 || b[i] == 2) ? 2 : (a[i] == 0 && b[i] == 0) ? 0 : 1;
  }
  return out;
}

TEST(AndOrBlockMasks, MatchTileRuleAndAreSoundForDenseAndOr) {
  const int qb = 32, kvb = 16;
  const auto masks = bm_test::sweep_masks(qb, kvb);
  for (size_t i = 0; i < masks.size(); ++i) {
    for (size_t j = 0; j < masks.size(); ++j) {
      SCOPED_TRACE(masks[i].name + " , " + masks[j].name);
      const MaskFn &fa = masks[i].fn, &fb = masks[j].fn;
      const BlockMask a = build_block_mask(fa, 1, 2, 150, 170, qb, kvb, 1);
      const BlockMask b = build_block_mask(fb, 1, 2, 150, 170, qb, kvb, 1);
      const BlockMask m_and = and_block_masks(a, b), m_or = or_block_masks(a, b);
      ASSERT_NO_THROW(validate(m_and));
      ASSERT_NO_THROW(validate(m_or));
      const auto ca = dense_classes(fa, 1, 2, 150, 170, qb, kvb), cb = dense_classes(fb, 1, 2, 150, 170, qb, kvb);
      const std::vector<uint8_t> d_and = to_dense(m_and), d_or = to_dense(m_or);
      EXPECT_EQ(d_and, rule(ca, cb, true));
      EXPECT_EQ(d_or, rule(ca, cb, false));
      // Sound for the combined mask_mod: a tile with any True is computed; a tile called full is all True.
      const MaskFn f_and = [&](int64_t bi, int64_t h, int64_t q, int64_t k) { return fa(bi, h, q, k) && fb(bi, h, q, k); };
      const MaskFn f_or = [&](int64_t bi, int64_t h, int64_t q, int64_t k) { return fa(bi, h, q, k) || fb(bi, h, q, k); };
      const auto t_and = dense_classes(f_and, 1, 2, 150, 170, qb, kvb), t_or = dense_classes(f_or, 1, 2, 150, 170, qb, kvb);
      for (size_t t = 0; t < t_and.size(); ++t) {
        EXPECT_TRUE(t_and[t] == 0 || d_and[t] != 0) << t;
        EXPECT_TRUE(d_and[t] != 2 || t_and[t] == 2) << t;
        EXPECT_TRUE(t_or[t] == 0 || d_or[t] != 0) << t;
        EXPECT_TRUE(d_or[t] != 2 || t_or[t] == 2) << t;
      }
    }
  }
}

TEST(AndOrBlockMasks, BroadcastsBatchAndHead) {
  const MaskFn per_b = [](int64_t b, int64_t, int64_t q, int64_t k) { return k <= q + 20 * b; };
  const MaskFn per_h = [](int64_t, int64_t h, int64_t q, int64_t k) { return k >= 16 * h; };
  const BlockMask a = build_block_mask(per_b, 2, 1, 64, 64, 16, 16);
  const BlockMask b = build_block_mask(per_h, 1, 3, 64, 64, 16, 16);
  const BlockMask m = and_block_masks(a, b);
  EXPECT_EQ(m.B, 2);
  EXPECT_EQ(m.H, 3);
  const auto ca = dense_classes(per_b, 2, 3, 64, 64, 16, 16), cb = dense_classes(per_h, 2, 3, 64, 64, 16, 16);
  EXPECT_EQ(to_dense(m), rule(ca, cb, true));
  EXPECT_EQ(to_dense(or_block_masks(b, a)), rule(cb, ca, false));
}

// Ordered row (members ascending first) of 4 kv blocks; returns the member count.
int32_t ordered_row4(const uint8_t* member, int32_t* idx) {
  int32_t n = 0;
  for (int32_t c = 0; c < 4; ++c)
    if (member[c]) idx[n++] = c;
  for (int32_t c = 0, k = n; c < 4; ++c)
    if (!member[c]) idx[k++] = c;
  return n;
}

TEST(AndOrBlockMasks, HasFull) {
  const BlockMask with = build_block_mask(kCausal, 1, 1, 64, 64, 16, 16);
  // The same causal mask with every computed tile partial (no full set).
  std::vector<int32_t> num(4), idx(16);
  const std::vector<uint8_t> dense = to_dense_01(with);
  for (int r = 0; r < 4; ++r) num[size_t(r)] = ordered_row4(dense.data() + 4 * r, idx.data() + 4 * r);
  const BlockMask without = from_kv_blocks(num, idx, nullptr, nullptr, 1, 1, 4, 4, 16, 16);
  EXPECT_FALSE(and_block_masks(with, without).has_full);
  // `without` has no full tiles, so every computed tile of the AND is partial.
  EXPECT_EQ(block_mask_stats(and_block_masks(with, without)).partial, 10);
  EXPECT_EQ(block_mask_stats(and_block_masks(with, with)).full, 6);
  const BlockMask m_or = or_block_masks(without, with);
  EXPECT_TRUE(m_or.has_full);
  EXPECT_EQ(block_mask_stats(m_or).full, 6);
  EXPECT_FALSE(or_block_masks(without, without).has_full);
}

TEST(AndOrBlockMasks, Errors) {
  const BlockMask a = build_block_mask(kCausal, 2, 2, 64, 64, 16, 16);
  expect_error([&] { and_block_masks(a, build_block_mask(kCausal, 1, 1, 65, 64, 16, 16)); },
               "and_block_masks: q_len differs (64 vs 65); expected both masks to have the same q_len");
  expect_error([&] { or_block_masks(a, build_block_mask(kCausal, 1, 1, 64, 63, 16, 16)); },
               "or_block_masks: kv_len differs (64 vs 63)");
  expect_error([&] { and_block_masks(a, build_block_mask(kCausal, 1, 1, 64, 64, 32, 16)); },
               "and_block_masks: q_block differs (16 vs 32)");
  expect_error([&] { and_block_masks(a, build_block_mask(kCausal, 1, 1, 64, 64, 16, 8)); },
               "and_block_masks: kv_block differs (16 vs 8)");
  expect_error([&] { or_block_masks(a, build_block_mask(kCausal, 3, 1, 64, 64, 16, 16)); },
               "or_block_masks: B = 2 and 3 do not broadcast; expected equal sizes or one of them 1");
  expect_error([&] { and_block_masks(build_block_mask(kCausal, 1, 4, 64, 64, 16, 16), a); },
               "and_block_masks: H = 4 and 2 do not broadcast");
  BlockMask broken = a;
  broken.kv_indices[0] = 9;
  expect_error([&] { and_block_masks(a, broken); }, "and_block_masks: kv_indices[0,0,0][0] = 9 is out of range");
}

}  // namespace
