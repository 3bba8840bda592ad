// FLEXATTN_DECODE_ROT_ROWS (kernels/decode/decode_rotated.cuh: unpadded K/V ring rows rotated by 32 x (row % 4), each
// copied by two bulk copies cut on a 32-byte edge of the source): the define reaches only sm_90a sources with the bulk
// ring; the kernels compile without spills or a stack at head dims 64, 128 and 256, with and without mods, alone and
// with the warp ring; and -- with a disassembler -- the main entries issue more bulk copies (the second piece) than the
// padded rows' kernels. The address map itself is checked on the host: every row's bytes land in its own row, once.
#include <gtest/gtest.h>

#include <vector>

#include "compile/compile_fixture.h"
#include "compile/decode/decode_build.h"
#include "compile/sm90/sass_tools.h"
#include "flexattn/codegen.h"
#include "flexattn/jit.h"
#include "flexattn/mods.h"
#include "runtime/decode_source.h"
#include "runtime/kernel_set.h"

using namespace flexattn;

namespace {

using DecodeRotRowsCompile = compile_test::CompileTest;

jit::CompiledKernel compile_rot(const Variant& v, int d, const std::string& arch, bool rot, bool warp_ring, bool bulk,
                                std::string* source) {
  runtime::DecodeTuning tuning = decode_test::base_tuning();
  tuning.merge = tuning.row_split = true;
  tuning.bulk = bulk;
  tuning.rot_rows = rot;
  tuning.warp_ring = warp_ring;
  return decode_test::compile_tuned(v, DType::BF16, d, d, arch, tuning,
                                    std::string("attn_decode_rot") + (rot ? "1" : "0") + (warp_ring ? "w" : "") +
                                        (bulk ? "" : "_cp"),
                                    source);
}

// decode_rot_addr's map, as the kernel computes it: byte j of row r at r * rb + (j + 32 (r % 4)) % rb.
int rot_offset(int r, int j, int rb) { return r * rb + ((j + 32 * (r & 3)) & (rb - 1)); }

}  // namespace

TEST(DecodeRotRows, EveryByteOnceInItsRowAndCopiesCutOnSectorEdges) {
  for (int rb : {128, 256, 512}) {
    std::vector<int> hits(64 * rb, 0);
    for (int r = 0; r < 64; ++r) {
      const int rot = 32 * (r & 3);
      for (int j = 0; j < rb; ++j) {
        const int at = rot_offset(r, j, rb);
        ASSERT_GE(at, r * rb);
        ASSERT_LT(at, (r + 1) * rb);
        ++hits[at];
      }
      // The two copies: source [0, rb - rot) to the row's byte rot, [rb - rot, rb) to byte 0; each contiguous at
      // both ends, and the cut at a 32-byte edge of the source (so no source sector is split between requests).
      EXPECT_EQ((rb - rot) % 32, 0);
      for (int j = 1; j < rb - rot; ++j) EXPECT_EQ(rot_offset(r, j, rb), rot_offset(r, j - 1, rb) + 1);
      for (int j = rb - rot + 1; j < rb; ++j) EXPECT_EQ(rot_offset(r, j, rb), rot_offset(r, j - 1, rb) + 1);
      if (rot != 0) EXPECT_EQ(rot_offset(r, rb - rot, rb), r * rb);
    }
    for (int h : hits) ASSERT_EQ(h, 1);
    // 16-byte reads of one column by 8 consecutive rows (an ldmatrix phase) fall in 4 distinct bank groups.
    for (int c = 0; c < rb; c += 16) {
      std::vector<int> groups(8, 0);
      for (int r = 0; r < 8; ++r) ++groups[(rot_offset(r, c, rb) / 16) % 8];
      for (int g : groups) EXPECT_LE(g, 2) << "rb " << rb << " column byte " << c;
    }
  }
}

TEST_F(DecodeRotRowsCompile, DefineOnlyWhereTheBulkRingIs) {
  Variant plain;
  std::string source;
  compile_rot(plain, 128, "sm_80", true, false, true, &source);
  EXPECT_EQ(source.find("FLEXATTN_DECODE_ROT_ROWS"), std::string::npos) << "sm_80 has no bulk ring";
  compile_rot(plain, 128, "sm_90a", true, false, false, &source);
  EXPECT_EQ(source.find("FLEXATTN_DECODE_ROT_ROWS"), std::string::npos) << "the cp.async ring keeps padded rows";
  compile_rot(plain, 128, "sm_90a", true, false, true, &source);
  EXPECT_NE(source.find("#define FLEXATTN_DECODE_ROT_ROWS 1"), std::string::npos);
}

TEST_F(DecodeRotRowsCompile, CompilesWithoutSpillsAndCopiesInTwoPieces) {
  Variant plain, windowed;
  windowed.mask_mod = mods::sliding_window(4096);
  windowed.score_mod = mods::softcap(30);
  for (int d : {64, 128, 256})
    for (const Variant* v : {&plain, &windowed})
      for (bool warp_ring : {false, true}) {
        const std::string what = std::string(v == &plain ? "plain" : "window+softcap") + " D=" + std::to_string(d) +
                                 (warp_ring ? " warp ring" : "");
        std::string source;
        const jit::CompiledKernel on = compile_rot(*v, d, "sm_90a", true, warp_ring, true, &source);
        decode_test::expect_clean(on, what);
        if (d != 128) continue;
        const jit::CompiledKernel off = compile_rot(*v, d, "sm_90a", false, warp_ring, true, &source);
        decode_test::for_each_main_entry(on, off, d, what, [](const std::string& a, const std::string& b,
                                                              const std::string& where) {
          EXPECT_GT(testing_sass::count(a, "UBLKCP"), testing_sass::count(b, "UBLKCP")) << where;
          EXPECT_EQ(testing_sass::count(a, "LDL") + testing_sass::count(a, "STL"), 0) << where;
        });
      }
}
