// FLEXATTN_DECODE_TMA (kernels/decode/decode_tma.cuh): the _tma entries exist only in sm_90a sources with the bulk
// ring, for head dims of whole 64-column boxes up to 128; they compile without spills or a stack at head dims 64 and 128
// (K and V dims apart too), with and without mods, beside the warp ring (which they leave out);
// their code differs from the bulk-row entries' and -- with a disassembler -- loads with TMA (UTMALDG) and issues no
// per-row bulk copies, while the bulk-row entries of the same source keep theirs. The row map is checked on the host
// (tests/unit/kernels/test_decode_row_maps_host.cc), the launch rule in tests/unit/runtime/test_decode_tma.cc.
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

using DecodeTmaCompile = compile_test::CompileTest;

runtime::DecodeTuning tma_tuning(bool tma, bool bulk = true) {
  runtime::DecodeTuning t = decode_test::base_tuning();
  t.merge = t.row_split = true;
  t.bulk = bulk;
  t.tma = tma;
  return t;
}

bool has_entry(const std::string& source, const std::string& entry) {
  return source.find(entry + "(const __grid_constant__") != std::string::npos;
}

}  // namespace

TEST_F(DecodeTmaCompile, EntriesOnlyWhereTheBulkRingAndWholeBoxesAre) {
  Variant plain;
  const std::string& a90 = "sm_90a";
  EXPECT_FALSE(runtime::decode_tma_source("sm_80", tma_tuning(true), 128, 128));
  EXPECT_FALSE(runtime::decode_tma_source(a90, tma_tuning(true, false), 128, 128)) << "the cp.async ring";
  EXPECT_FALSE(runtime::decode_tma_source(a90, tma_tuning(false), 128, 128));
  EXPECT_FALSE(runtime::decode_tma_source(a90, tma_tuning(true), 96, 96));
  EXPECT_FALSE(runtime::decode_tma_source(a90, tma_tuning(true), 128, 96));
  EXPECT_TRUE(runtime::decode_tma_source(a90, tma_tuning(true), 128, 128));
  EXPECT_TRUE(runtime::decode_tma_source(a90, tma_tuning(true), 64, 128));
  EXPECT_FALSE(runtime::decode_tma_source(a90, tma_tuning(true), 256, 64)) << "not yet run on a GPU above 128";
  EXPECT_FALSE(runtime::decode_tma_source(a90, tma_tuning(true), 256, 256));
  EXPECT_EQ(runtime::decode_kernel_names(128, 128, true),
            (std::vector<std::string>{"flexattn_decode_m16", "flexattn_decode_m64", "flexattn_decode_m16_tma",
                                      "flexattn_decode_m64_tma", "flexattn_decode_combine"}));
  EXPECT_EQ(runtime::decode_kernel_names(256, 256, true),
            (std::vector<std::string>{"flexattn_decode_m16", "flexattn_decode_m16_tma", "flexattn_decode_combine"}));

  const runtime::KernelSetKey k80{DType::BF16, 128, 128, "sm_80", false, runtime::KernelFamily::decode};
  const runtime::KernelSetKey k90{DType::BF16, 128, 128, a90, false, runtime::KernelFamily::decode};
  const runtime::KernelSetKey k96{DType::BF16, 96, 96, a90, false, runtime::KernelFamily::decode};
  const auto gen = codegen::emit_cuda_variant(plain, false);
  std::string s = runtime::kernel_source_decode(gen, k80, tma_tuning(true));
  EXPECT_EQ(s.find("FLEXATTN_DECODE_TMA"), std::string::npos);
  EXPECT_FALSE(has_entry(s, "flexattn_decode_m16_tma"));
  s = runtime::kernel_source_decode(gen, k96, tma_tuning(true));
  EXPECT_EQ(s.find("FLEXATTN_DECODE_TMA"), std::string::npos) << "D=96 has no whole boxes";
  EXPECT_FALSE(has_entry(s, "flexattn_decode_m16_tma"));
  s = runtime::kernel_source_decode(gen, k90, tma_tuning(false));
  EXPECT_EQ(s.find("FLEXATTN_DECODE_TMA"), std::string::npos) << "off by default: the source is unchanged";
  EXPECT_FALSE(has_entry(s, "flexattn_decode_m16_tma"));
  s = runtime::kernel_source_decode(gen, k90, tma_tuning(true));
  EXPECT_NE(s.find("#define FLEXATTN_DECODE_TMA 1"), std::string::npos);
  for (const char* e : {"flexattn_decode_m16", "flexattn_decode_m64", "flexattn_decode_m16_tma", "flexattn_decode_m64_tma"})
    EXPECT_TRUE(has_entry(s, e)) << e;
  EXPECT_NE(s.find("flexattn_decode_m16_tma(const __grid_constant__ AttnParams p) { attn_decode<FlexVariant, bf16, 128, "
                   "128, 16, true>(p); }"),
            std::string::npos)
      << s;
}

TEST_F(DecodeTmaCompile, CompilesWithoutSpillsAndLoadsWithTma) {
  Variant plain, windowed;
  windowed.mask_mod = mods::sliding_window(4096);
  windowed.score_mod = mods::softcap(30);
  for (auto [d, dv] : {std::pair{64, 64}, std::pair{128, 128}, std::pair{64, 128}, std::pair{128, 64}})
    for (const Variant* v : {&plain, &windowed}) {
      const std::string what = std::string(v == &plain ? "plain" : "window+softcap") + " D=" + std::to_string(d) +
                               " Dv=" + std::to_string(dv);
      std::string source;
      const jit::CompiledKernel k =
          decode_test::compile_tuned(*v, DType::BF16, d, dv, "sm_90a", tma_tuning(true), "attn_decode_tma", &source);
      decode_test::expect_clean(k, what);
      const auto bulk = testing_sass::elf_section(*k.cubin, ".text.flexattn_decode_m16");
      const auto tma = testing_sass::elf_section(*k.cubin, ".text.flexattn_decode_m16_tma");
      ASSERT_TRUE(bulk && tma) << what;
      EXPECT_NE(*bulk, *tma) << what << ": the _tma entry is the bulk-row entry";
      std::string why;
      const std::optional<std::string> sass = testing_sass::disassemble(*k.cubin, &why);
      if (!sass) {
        std::printf("  %s: no disassembler (%s); the SASS checks are skipped\n", what.c_str(), why.c_str());
        continue;
      }
      for (const std::string& entry : runtime::decode_kernel_names(d, dv, true)) {
        if (entry == "flexattn_decode_combine") continue;
        const std::string f = testing_sass::function_sass(*sass, entry);
        ASSERT_FALSE(f.empty()) << what << " " << entry;
        const bool tma = entry.find("_tma") != std::string::npos;
        EXPECT_EQ(testing_sass::count(f, "UTMALDG") > 0, tma) << what << " " << entry;
        EXPECT_EQ(testing_sass::count(f, "UBLKCP") > 0, !tma) << what << " " << entry;
      }
    }
}

TEST_F(DecodeTmaCompile, BoxesOf16RowsOnRequest) {
  Variant plain;
  runtime::DecodeTuning t = tma_tuning(true);
  const runtime::KernelSetKey k90{DType::BF16, 128, 128, "sm_90a", false, runtime::KernelFamily::decode};
  const auto gen = codegen::emit_cuda_variant(plain, false);
  EXPECT_EQ(runtime::kernel_source_decode(gen, k90, t).find("FLEXATTN_DECODE_TMA_BOX"), std::string::npos)
      << "the default box (64 rows, or the tile's 32 above D = 128) is the headers'";
  t.tma_box = 16;
  for (int d : {64, 128}) {
    std::string source;
    const jit::CompiledKernel k =
        decode_test::compile_tuned(plain, DType::BF16, d, d, "sm_90a", t, "attn_decode_tma_box16", &source);
    EXPECT_NE(source.find("#define FLEXATTN_DECODE_TMA_BOX 16"), std::string::npos);
    decode_test::expect_clean(k, "16-row boxes D=" + std::to_string(d));
  }
}

TEST_F(DecodeTmaCompile, WholeRowBoxesOnRequest) {
  Variant plain;
  runtime::DecodeTuning t = tma_tuning(true);
  const runtime::KernelSetKey k90{DType::BF16, 128, 128, "sm_90a", false, runtime::KernelFamily::decode};
  const auto gen = codegen::emit_cuda_variant(plain, false);
  EXPECT_EQ(runtime::kernel_source_decode(gen, k90, t).find("FLEXATTN_DECODE_TMA_WHOLE"), std::string::npos)
      << "boxes of 64 columns are the headers' default";
  t.tma_whole = true;
  for (int box : {16, 64})
    for (int d : {64, 128}) {
      t.tma_box = box;
      std::string source;
      const std::string what = "whole rows, box " + std::to_string(box) + ", D=" + std::to_string(d);
      const jit::CompiledKernel k =
          decode_test::compile_tuned(plain, DType::BF16, d, d, "sm_90a", t, "attn_decode_tma_whole", &source);
      EXPECT_NE(source.find("#define FLEXATTN_DECODE_TMA_WHOLE 1"), std::string::npos) << what;
      decode_test::expect_clean(k, what);
    }
}

TEST_F(DecodeTmaCompile, EvictFirstLoadsOnRequest) {
  Variant plain;
  runtime::DecodeTuning t = tma_tuning(true);
  const runtime::KernelSetKey k90{DType::BF16, 128, 128, "sm_90a", false, runtime::KernelFamily::decode};
  const auto gen = codegen::emit_cuda_variant(plain, false);
  EXPECT_EQ(runtime::kernel_source_decode(gen, k90, t).find("FLEXATTN_DECODE_EVICT_FIRST"), std::string::npos)
      << "normal priority is the headers' default";
  t.evict_first = 2;
  const std::string level2 = runtime::kernel_source_decode(gen, k90, t);
  t.evict_first = 1;
  EXPECT_EQ(runtime::kernel_source_decode(gen, k90, t), level2)
      << "levels 1 and 2 differ in the launch only: one kernel";
  for (bool whole : {false, true}) {
    t.tma_whole = whole;
    std::string source;
    const std::string what = std::string("evict_first, ") + (whole ? "whole rows" : "64-column boxes");
    const jit::CompiledKernel k =
        decode_test::compile_tuned(plain, DType::BF16, 128, 128, "sm_90a", t, "attn_decode_tma_evict", &source);
    EXPECT_NE(source.find("#define FLEXATTN_DECODE_EVICT_FIRST 1"), std::string::npos) << what;
    decode_test::expect_clean(k, what);
  }
}

TEST_F(DecodeTmaCompile, BesideTheWarpRing) {
  Variant plain;
  runtime::DecodeTuning t = tma_tuning(true);
  t.warp_ring = true;
  std::string source;
  const jit::CompiledKernel k =
      decode_test::compile_tuned(plain, DType::BF16, 128, 128, "sm_90a", t, "attn_decode_tma_beside", &source);
  EXPECT_NE(source.find("#define FLEXATTN_DECODE_TMA 1"), std::string::npos);
  EXPECT_NE(source.find("#define FLEXATTN_DECODE_WARP_RING 1"), std::string::npos);
  decode_test::expect_clean(k, "with the warp ring");
}
