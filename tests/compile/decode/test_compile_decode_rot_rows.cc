// FLEXATTN_DECODE_ROT_ROWS (kernels/decode/decode_rotated.cuh: unpadded K/V ring rows rotated by 32 x (row % 4), each
// copied by two bulk copies cut on a 32-byte edge of the source): the define reaches only sm_90a sources with the bulk
// ring; the kernels compile without spills or a stack at head dims 64, 128 and 256, with and without mods, alone and
// with the warp ring; and -- with a disassembler -- the main entries issue more bulk copies (the second piece) than the
// padded rows' kernels; without one, the m16 entry's code at least differs from the padded kernel's. Head dims that are
// not powers of two, and K / V dims that differ, still compile under the define. The address map and the fragment
// loads are checked on the host (tests/unit/kernels/test_decode_row_maps_host.cc).
#include <gtest/gtest.h>

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

}  // namespace

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
        EXPECT_FALSE(decode_test::same_entry_code(on, off, "flexattn_decode_m16", what)) << what << ": the define changed nothing";
        decode_test::for_each_main_entry(on, off, d, what, [](const std::string& a, const std::string& b,
                                                              const std::string& where) {
          EXPECT_GT(testing_sass::count(a, "UBLKCP"), testing_sass::count(b, "UBLKCP")) << where;
        });
      }
}

TEST_F(DecodeRotRowsCompile, OtherHeadDimsCompileUnderTheDefine) {
  Variant plain;
  for (auto [d, dv] : {std::pair{128, 64}, std::pair{64, 128}, std::pair{96, 96}}) {
    runtime::DecodeTuning tuning = decode_test::base_tuning();
    tuning.rot_rows = true;
    std::string source;
    const jit::CompiledKernel k = decode_test::compile_tuned(plain, DType::BF16, d, dv, "sm_90a", tuning,
                                                             "attn_decode_rot_dims", &source);
    EXPECT_NE(source.find("#define FLEXATTN_DECODE_ROT_ROWS 1"), std::string::npos);
    decode_test::expect_clean(k, "D=" + std::to_string(d) + " Dv=" + std::to_string(dv));
  }
}
