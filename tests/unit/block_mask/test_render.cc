// to_dense / to_dense_01 and the to_string picture (golden).
#include "unit/block_mask/oracle.h"

namespace {

using namespace flexattn;
using bm_test::expect_error;

const MaskFn kCausal = [](int64_t, int64_t, int64_t q, int64_t k) { return q >= k; };

TEST(ToDense, ClassesAndTorch01) {
  const BlockMask bm = build_block_mask(kCausal, 1, 1, 64, 64, 16, 16);
  const std::vector<uint8_t> classes = {1, 0, 0, 0,  //
                                        2, 1, 0, 0,  //
                                        2, 2, 1, 0,  //
                                        2, 2, 2, 1};
  EXPECT_EQ(to_dense(bm), classes);
  const std::vector<uint8_t> torch01 = {1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1};
  EXPECT_EQ(to_dense_01(bm), torch01);
  EXPECT_EQ(kBlockSkipped, 0);
  EXPECT_EQ(kBlockPartial, 1);
  EXPECT_EQ(kBlockFull, 2);
}

TEST(ToString, GoldenCausalAscii) {
  const BlockMask bm = build_block_mask(kCausal, 1, 1, 64, 64, 16, 16);
  EXPECT_EQ(to_string(bm, 20, true),
            "BlockMask(shape=(1, 1, 64, 64), block=(16, 16), sparsity=37.50%)\n"
            "(0, 0)\n"
            "++......\n"
            "##++....\n"
            "####++..\n"
            "######++\n");
}

TEST(ToString, GoldenCausalUnicode) {
  const BlockMask bm = build_block_mask(kCausal, 1, 1, 48, 48, 16, 16);
  EXPECT_EQ(to_string(bm),
            "BlockMask(shape=(1, 1, 48, 48), block=(16, 16), sparsity=33.33%)\n"
            "(0, 0)\n"
            "\u2591\u2591    \n"
            "\u2588\u2588\u2591\u2591  \n"
            "\u2588\u2588\u2588\u2588\u2591\u2591\n");
}

TEST(ToString, DownsamplesLikeTorch) {
  // 4x4 tiles shown as 2x2 cells: a cell is full only if all its tiles are, empty only if all are skipped.
  const BlockMask bm = build_block_mask(kCausal, 1, 1, 64, 64, 16, 16);
  EXPECT_EQ(to_string(bm, 2, true),
            "BlockMask(shape=(1, 1, 64, 64), block=(16, 16), sparsity=37.50%)\n"
            "(0, 0)\n"
            "++..\n"
            "##++\n");
  // 5 tiles with max_rows 2: step ceil(5/2) = 3, so cells cover tiles {0,1,2} and {3,4}.
  const BlockMask five = build_block_mask(kCausal, 1, 1, 80, 80, 16, 16);
  EXPECT_EQ(to_string(five, 2, true).substr(to_string(five, 2, true).find("(0, 0)\n") + 7), "++..\n##++\n");
  // -1: one cell per tile, even beyond the default 20 (1x1 tiles: the causal diagonal is full).
  const BlockMask big = build_block_mask(kCausal, 1, 1, 25, 25, 1, 1);
  EXPECT_NE(to_string(big, -1, true).find("\n" + std::string(50, '#') + "\n"), std::string::npos);
  EXPECT_NE(to_string(big, 20, true).find("\n" + std::string(26, '#') + "\n"), std::string::npos);
  EXPECT_EQ(to_string(big, 20, true).find(std::string(27, '#')), std::string::npos);
}

TEST(ToString, OnePanelPerBatchHeadWithLimit) {
  const MaskFn per_h = [](int64_t, int64_t h, int64_t q, int64_t k) { return h == 0 ? q >= k : k >= q; };
  const BlockMask bm = build_block_mask(per_h, 1, 3, 32, 32, 16, 16);
  EXPECT_EQ(to_string(bm, 20, true, 2),
            "BlockMask(shape=(1, 3, 32, 32), block=(16, 16), sparsity=25.00%)\n"
            "(0, 0)\n"
            "++..\n"
            "##++\n"
            "\n"
            "(0, 1)\n"
            "++##\n"
            "..++\n"
            "...\n"
            "(1 more (b, h) pairs; raise limit to see them)\n");
  const std::string all = to_string(bm, 20, true, -1);
  EXPECT_NE(all.find("(0, 2)\n++##\n..++\n"), std::string::npos);
  EXPECT_EQ(all.find("..."), std::string::npos);
}

TEST(ToString, Errors) {
  const BlockMask bm = build_block_mask(kCausal, 1, 1, 32, 32, 16, 16);
  expect_error([&] { to_string(bm, 0); }, "to_string: max_rows must be >= 1 or -1 (one cell per tile), got 0");
  expect_error([&] { to_string(bm, 20, false, 0); }, "to_string: limit must be >= 1 or -1 (all (b, h) pairs), got 0");
  BlockMask broken = bm;
  broken.nkv = 7;
  expect_error([&] { to_string(broken); }, "to_dense: nkv = 7 does not match kv_len = 32");
}

}  // namespace
