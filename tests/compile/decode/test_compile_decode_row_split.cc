// FLEXATTN_DECODE_ROW_SPLIT (walks without a block mask split their kv rows evenly, not their 64-row tiles;
// kernels/decode/attn_decode.cuh DecodeTiles): the ranges (decode_row_split) cover every row once, the longest
// split holds ceil(kv_len / splits) rows, and the source with the define compiles without spills or a stack.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compile/compile_fixture.h"
#include "compile/decode/decode_build.h"
#include "decode/decode_config.h"
#include "flexattn/mods.h"

using namespace flexattn;

TEST(DecodeRowSplit, RangesCoverEveryRowOnceAndBalance) {
  for (int kv_len : {0, 1, 17, 127, 129, 1000, 4097, 8192, 131072})
    for (int splits : {1, 2, 3, 6, 7, 48, 128}) {
      const int per = (kv_len + splits - 1) / splits;
      int next = 0, longest = 0;
      for (int s = 0; s < splits; ++s) {
        const kern::DecodeRowRange r = kern::decode_row_split(kv_len, splits, s);
        const std::string where = "kv_len " + std::to_string(kv_len) + " splits " + std::to_string(splits) +
                                  " split " + std::to_string(s);
        EXPECT_EQ(r.row0, next) << where;  // contiguous, in split order
        EXPECT_LE(r.row0, r.end) << where;
        EXPECT_LE(r.end - r.row0, per) << where;
        next = r.end;
        longest = std::max(longest, r.end - r.row0);
      }
      EXPECT_EQ(next, kv_len) << kv_len << " / " << splits;
      EXPECT_EQ(longest, per) << kv_len << " / " << splits;
    }
  // 8x8k's 6 splits: 1366 rows at most, where tile splits give the longest 22 tiles (1408 rows).
  EXPECT_EQ(kern::decode_row_split(8192, 6, 0).end, 1366);
  EXPECT_EQ(kern::decode_row_split(8192, 6, 5).row0, 6830);
  // No int overflow near the int range (split * per is formed in 64 bits).
  const kern::DecodeRowRange last = kern::decode_row_split(2147483647, 128, 127);
  EXPECT_EQ(last.end, 2147483647);
  EXPECT_LT(last.row0, last.end);
}

using DecodeRowSplitCompile = compile_test::CompileTest;

TEST_F(DecodeRowSplitCompile, CompilesWithoutSpills) {
  Variant plain, softcap;
  softcap.score_mod = mods::softcap(30);
  for (const char* arch : {"sm_90a", "sm_80"})
    for (int d : {64, 128, 256})
      for (const Variant* v : {&plain, &softcap}) {
        runtime::DecodeTuning tuning = decode_test::base_tuning();
        tuning.merge = tuning.row_split = true;
        std::string source;
        const jit::CompiledKernel k =
            decode_test::compile_tuned(*v, DType::BF16, d, d, arch, tuning, "attn_decode_row_split", &source);
        EXPECT_NE(source.find("#define FLEXATTN_DECODE_ROW_SPLIT 1"), std::string::npos);
        decode_test::expect_clean(k, std::string(v == &plain ? "plain" : "softcap") + " D=" + std::to_string(d) +
                                         " " + arch);
      }
}
