// FLEXATTN_DECODE_WARP_RING (kernels/decode/attn_decode.cuh: each warp of an m16 tile copies and waits for its own
// 16 K and V rows of every stage on its own mbarrier, so the main loop has no CTA barrier): the define reaches only
// sm_90a sources with the bulk ring; the kernels compile without spills or a stack at head dims 64, 128 and 256 with
// and without mods; the m16 entry's code changes and the m64 entry's does not; and -- with a disassembler -- the m16
// entry has fewer CTA barriers than the CTA-wide ring's
// (the loop's B2 becomes a warp barrier) while the m64 entry, which keeps the CTA-wide ring, has as many.
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

using DecodeWarpRingCompile = compile_test::CompileTest;

jit::CompiledKernel compile_ring(const Variant& v, int d, const std::string& arch, bool warp_ring, bool bulk,
                                 std::string* source) {
  runtime::DecodeTuning tuning = decode_test::base_tuning();
  tuning.merge = tuning.row_split = true;
  tuning.bulk = bulk;
  tuning.warp_ring = warp_ring;
  return decode_test::compile_tuned(v, DType::BF16, d, d, arch, tuning,
                                    std::string("attn_decode_ring_") + (warp_ring ? "warp" : "cta") + (bulk ? "" : "_cp"),
                                    source);
}

}  // namespace

TEST_F(DecodeWarpRingCompile, DefineOnlyWhereTheBulkRingIs) {
  Variant plain;
  std::string source;
  compile_ring(plain, 128, "sm_80", true, true, &source);
  EXPECT_EQ(source.find("FLEXATTN_DECODE_WARP_RING"), std::string::npos) << "sm_80 has no bulk ring";
  compile_ring(plain, 128, "sm_90a", true, false, &source);
  EXPECT_EQ(source.find("FLEXATTN_DECODE_WARP_RING"), std::string::npos) << "the cp.async ring keeps its barriers";
  compile_ring(plain, 128, "sm_90a", true, true, &source);
  EXPECT_NE(source.find("#define FLEXATTN_DECODE_WARP_RING 1"), std::string::npos);
}

TEST_F(DecodeWarpRingCompile, CompilesWithoutSpillsAndDropsTheLoopBarrier) {
  Variant plain, windowed;
  windowed.mask_mod = mods::sliding_window(4096);
  windowed.score_mod = mods::softcap(30);
  for (int d : {64, 128, 256})
    for (const Variant* v : {&plain, &windowed}) {
      const std::string what = std::string(v == &plain ? "plain" : "window+softcap") + " D=" + std::to_string(d);
      std::string source;
      const jit::CompiledKernel on = compile_ring(*v, d, "sm_90a", true, true, &source);
      decode_test::expect_clean(on, what);
      const jit::CompiledKernel off = compile_ring(*v, d, "sm_90a", false, true, &source);
      // Without a disassembler too: the m16 entry's code changes, the m64 entry's (CTA-wide ring) does not.
      EXPECT_FALSE(decode_test::same_entry_code(on, off, "flexattn_decode_m16", what)) << what;
      if (d <= 128) {
        EXPECT_TRUE(decode_test::same_entry_code(on, off, "flexattn_decode_m64", what)) << what << ": m64 keeps the CTA-wide ring";
      }
      decode_test::for_each_main_entry(on, off, d, what, [](const std::string& a, const std::string& b,
                                                            const std::string& where) {
        const int bars_a = testing_sass::count(a, "BAR.SYNC"), bars_b = testing_sass::count(b, "BAR.SYNC");
        if (where.find("_m16") != std::string::npos) {
          EXPECT_LT(bars_a, bars_b) << where << ": the loop's CTA barrier should be gone";
        } else {
          EXPECT_EQ(bars_a, bars_b) << where << ": m64 keeps the CTA-wide ring";
        }
        EXPECT_EQ(testing_sass::count(a, "LDL") + testing_sass::count(a, "STL"), 0) << where;
      });
    }
}
