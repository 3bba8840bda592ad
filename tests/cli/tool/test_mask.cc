// `flexattn mask`: the ascii picture, block counts and sparsity of known masks.
#include <gtest/gtest.h>

#include "cli_test_util.h"

using flexattn::test::CliResult;
using flexattn::test::contains;
using flexattn::test::run_cli;

TEST(CliMask, CausalFourByFour) {
  const CliResult r = run_cli({"mask", "--mask", "causal", "-Q", "512"});
  ASSERT_EQ(r.rc, 0) << r.err;
  // Diagonal tiles partial, below full, above skipped; each cell printed twice.
  EXPECT_TRUE(contains(r.out, "\n++......\n##++....\n####++..\n######++\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "tiles: 4 partial, 6 full, 6 skipped of 16 (nq=4 x nkv=4 per b,h)")) << r.out;
  EXPECT_TRUE(contains(r.out, "sparsity: 37.50%")) << r.out;
  EXPECT_TRUE(contains(r.out, "mask dims B=1 H=1")) << r.out;
}

TEST(CliMask, SlidingWindowWithSmallBlocksAndTail) {
  // Window 16 with 16-wide blocks: the diagonal and the tile left of it are partial, rest skipped;
  // Q = 72 leaves a tail block (never full).
  const CliResult r = run_cli({"mask", "--mask", "sliding_window:16", "-Q", "72", "--block", "16"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "\n++........\n++++......\n..++++....\n....++++..\n......++++\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "tiles: 9 partial, 0 full, 16 skipped of 25")) << r.out;
  EXPECT_TRUE(contains(r.out, "sparsity: 64.00%")) << r.out;
}

TEST(CliMask, HeadDependentTextMaskKeepsTheHeadDimension) {
  const CliResult r = run_cli({"mask", "--mask-expr", "h == 0 || q_idx >= kv_idx", "-H", "2", "-Q", "256"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "mask dims B=1 H=2")) << r.out;
  EXPECT_TRUE(contains(r.out, "(0, 0)\n####\n####\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "(0, 1)\n++..\n##++\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "tiles: 2 partial, 5 full, 1 skipped of 8")) << r.out;
}

TEST(CliMask, DocumentMaskFromTheRegistryBuffer) {
  const CliResult r = run_cli({"mask", "--mask", "document:4", "-Q", "512"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "\n##......\n..##....\n....##..\n......##\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "sparsity: 75.00%")) << r.out;
}
