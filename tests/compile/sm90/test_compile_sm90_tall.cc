// The tall sm90 forward (FLEXATTN_SM90_FWD_TALL: three consumer warpgroups, 192 x 128 tiles at D = Dv = 64,
// kernels/sm90/tile_config_sm90.h) compiles with NVRTC for sm_90a: every corpus variant, the persistent kernel (the
// default) and the one-CTA-per-tile one, with no spills, no stack and no ptxas warning; 512 threads cap the entry at
// 128 registers, and -- with a disassembler -- the consumers stay under their setmaxnreg 160 and the producer
// under 24. The set says which kernel it holds: the tall one only where it applies.
#include <gtest/gtest.h>

#include <cstdlib>

#include "compile/compile_fixture.h"
#include "corpus.h"
#include "flexattn/codegen.h"
#include "flexattn/jit.h"
#include "flexattn/mods.h"
#include "runtime/kernel_set.h"
#include "runtime/tma_sm90.h"
#include "sass_tools.h"
#include "sm90/tile_config_sm90.h"
#include "sm90_fwd_build.h"

using namespace flexattn;

namespace {

using Sm90TallCompile = compile_test::CompileTest;

runtime::KernelSetKey tall_key(int d, int dv, DType t = DType::BF16) {
  runtime::KernelSetKey key{t, d, dv, "sm_90a", false, runtime::KernelFamily::sm90};
  key.sm90_fwd_tall = true;
  return key;
}

void expect_clean_tall(const jit::CompiledKernel& compiled, const std::string& what, bool* have_sass) {
  ASSERT_EQ(compiled.ptxas.count("flexattn_fwd"), 1u) << what << "\n" << compiled.log;
  const jit::PtxasInfo& info = compiled.ptxas.at("flexattn_fwd");
  EXPECT_EQ(info.spill_stores + info.spill_loads, 0) << what << " spills";
  EXPECT_EQ(info.stack, 0) << what << " has a stack frame";
  // Exactly the entry cap of __launch_bounds__(512, 1): setmaxnreg.inc draws only on what the CTA's own dec
  // released, so the consumers' 160 needs every thread to start at 128 (128 * 24 + 384 * 160 <= 512 * 128).
  EXPECT_EQ(info.registers, 65536 / kern::kSm90TallThreads) << what << ": __launch_bounds__(512, 1)";
  EXPECT_EQ(compiled.log.find("warning"), std::string::npos) << what << " ptxas warned:\n" << compiled.log;
  if (!*have_sass) return;
  std::string why;
  const std::optional<std::string> sass = testing_sass::disassemble(*compiled.cubin, &why);
  if (!sass) {
    *have_sass = false;
    return;
  }
  EXPECT_GT(testing_sass::count(*sass, "HGMMA.64x128x16"), 0) << what;
  EXPECT_EQ(testing_sass::count(*sass, "USETMAXREG"), 2) << what << ": setmaxnreg dec + inc";
  EXPECT_EQ(testing_sass::count(*sass, "LDL") + testing_sass::count(*sass, "STL"), 0) << what << ": local memory";
  EXPECT_LT(testing_sass::max_register(*sass), kern::kSm90TallConsumerRegs) << what;
  const std::optional<int> producer = testing_sass::producer_max_register(*sass);
  ASSERT_TRUE(producer.has_value()) << what;
  EXPECT_LT(*producer, kern::kSm90ProducerRegs) << what;
}

}  // namespace

// Every corpus variant's set asked for the tall kernel holds a clean kernel: the tall one, or -- where the tall one
// spills at 160 registers -- the usual one (kernel_set.cc). The light mods must keep the tall one.
TEST_F(Sm90TallCompile, EveryCorpusVariantGetsACleanKernel) {
  bool have_sass = true;
  std::string fell_back;
  for (const corpus::CorpusEntry& c : corpus::mod_corpus()) {
    mods::ProblemShape shape{1, 4, 4, 256, 256, 64, 64, 1};
    corpus::BuiltVariant b = corpus::build_variant(c, shape);
    const runtime::KernelSet& set = runtime::get_kernel_set(b.variant, tall_key(64, 64));
    if (set.sm90_fwd.tall) {
      expect_clean_tall(set.compiled, "tall " + c.name, &have_sass);
      continue;
    }
    fell_back += " " + c.name;
    const jit::PtxasInfo& info = set.compiled.ptxas.at("flexattn_fwd");
    EXPECT_EQ(info.spill_stores + info.spill_loads + info.stack, 0) << c.name << ": the fallback must be clean";
    EXPECT_LE(info.registers, 168) << c.name << ": the usual kernel (384 threads)";
  }
  for (const char* light : {" full ", " causal ", " alibi+causal ", " sliding_window:100 "})
    EXPECT_EQ((fell_back + " ").find(light), std::string::npos) << light << " fell back:" << fell_back;
  std::printf("usual kernel (tall spilled, or not suited) for:%s\n", fell_back.c_str());
}

// Variants the tall tile does not suit (sm90_fwd_tall_suits: the exact softcap, score mods reading captured buffers)
// get the usual kernel without a tall compile first: their set's source is the usual one from the start.
TEST_F(Sm90TallCompile, HeavyScoreModsSkipTheTallTile) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 64, 64, 1};
  for (const char* score : {"softcap:30", "relbias:const", "relbias", "t5"}) {
    corpus::BuiltVariant b = corpus::build_variant(corpus::CorpusEntry{score, "", score}, shape);
    const codegen::GeneratedVariant gen = codegen::emit_cuda_variant(b.variant, false);
    EXPECT_FALSE(runtime::sm90_fwd_tall_suits(gen)) << score;
    EXPECT_FALSE(runtime::sm90_fwd_form(gen, tall_key(64, 64)).tall) << score;
    EXPECT_EQ(runtime::kernel_source_sm90(gen, tall_key(64, 64)).find("kSm90TallThreads"), std::string::npos) << score;
  }
  for (const char* light : {"full", "alibi+causal", "softcap_approx:30+causal"}) {
    const Variant v = corpus::build_variant(corpus::corpus_entry(light), shape).variant;
    EXPECT_TRUE(runtime::sm90_fwd_tall_suits(codegen::emit_cuda_variant(v, false))) << light;
  }
}

// The one-CTA-per-tile kernel (FLEXATTN_SM90_PERSISTENT=0) and f16: the source is compiled directly (the kernel-set
// cache is keyed without the persistent flag).
TEST_F(Sm90TallCompile, DefaultKernelAndF16CompileCleanly) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 64, 64, 1};
  bool have_sass = true;
  for (const char* name : {"full", "causal", "alibi+causal"}) {
    const Variant v = corpus::build_variant(corpus::corpus_entry(name), shape).variant;
    const codegen::GeneratedVariant gen = codegen::emit_cuda_variant(v, false);
    setenv("FLEXATTN_SM90_PERSISTENT", "0", 1);
    const std::string src = runtime::kernel_source_sm90(gen, tall_key(64, 64));
    unsetenv("FLEXATTN_SM90_PERSISTENT");
    EXPECT_NE(src.find("attn_fwd_sm90<FlexVariant, bf16, 64, 64, false, false, true>(p)"), std::string::npos) << src;
    expect_clean_tall(sm90_test::compile_fwd_source("attn_fwd_sm90a_tall_default", src), std::string("default ") + name,
                      &have_sass);
    const std::string f16 = runtime::kernel_source_sm90(gen, tall_key(64, 64, DType::F16));
    EXPECT_NE(f16.find("attn_fwd_sm90<FlexVariant, fp16, 64, 64, false, true, true>(p)"), std::string::npos) << f16;
    expect_clean_tall(sm90_test::compile_fwd_source("attn_fwd_sm90a_tall_f16", f16), std::string("f16 ") + name,
                      &have_sass);
  }
}

// A distance-only bias without buffers (a formula of q - kv) suits the tall tile (FLEXATTN_SM90_REL_DIAG=0), but with
// the tables (the default) the 34 table values a thread holds spilled the tall consumers' 160 registers (60 bytes, ptxas 13.0): the form
// takes the tables on the usual tile, which compiles clean, instead of a tall compile that would fall back.
TEST_F(Sm90TallCompile, DistanceTablesTakeTheUsualTile) {
  const Variant v = [] {
    Variant x;
    x.score_mod = ir::score() + ir::log2(ir::abs(ir::q_idx() - ir::kv_idx()) + 1.0);
    x.mask_mod = mods::causal();
    return x;
  }();
  const codegen::GeneratedVariant gen = codegen::emit_cuda_variant(v, false);
  ASSERT_TRUE(gen.rel_diag);
  ASSERT_TRUE(runtime::sm90_fwd_tall_suits(gen));
  setenv("FLEXATTN_SM90_REL_DIAG", "0", 1);
  EXPECT_TRUE(runtime::sm90_fwd_form(gen, tall_key(64, 64)).tall);
  unsetenv("FLEXATTN_SM90_REL_DIAG");
  const runtime::Sm90FwdForm form = runtime::sm90_fwd_form(gen, tall_key(64, 64));
  const std::string src = runtime::kernel_source_sm90_fwd(gen, tall_key(64, 64), form);
  EXPECT_TRUE(form.rel_diag);
  EXPECT_FALSE(form.tall);
  EXPECT_NE(src.find("#define FLEXATTN_SM90_REL_DIAG 1"), std::string::npos);
  const jit::CompiledKernel compiled = sm90_test::compile_fwd_source("attn_fwd_sm90a_rel_diag_formula", src);
  ASSERT_EQ(compiled.ptxas.count("flexattn_fwd"), 1u) << compiled.log;
  EXPECT_EQ(compiled.ptxas.at("flexattn_fwd").spill_stores + compiled.ptxas.at("flexattn_fwd").spill_loads, 0);
  EXPECT_EQ(compiled.log.find("warning"), std::string::npos) << compiled.log;
}

// Asked for where it does not apply (another head dim, a narrow variant), the set holds the usual kernel.
TEST_F(Sm90TallCompile, OtherHeadDimsAndNarrowVariantsKeepTheUsualKernel) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 64, 64, 1};
  const Variant causal = corpus::build_variant(corpus::corpus_entry("causal"), shape).variant;
  const runtime::KernelSet& d128 = runtime::get_kernel_set(causal, tall_key(128, 128));
  EXPECT_FALSE(d128.sm90_fwd.tall);
  EXPECT_LE(d128.compiled.ptxas.at("flexattn_fwd").registers, 168);
  const Variant relbias = corpus::build_variant(corpus::corpus_entry("relbias(learnable)"), shape).variant;
  setenv("FLEXATTN_SM90_NARROW", "1", 1);
  const std::string src = runtime::kernel_source_sm90(codegen::emit_cuda_variant(relbias, false), tall_key(64, 64));
  unsetenv("FLEXATTN_SM90_NARROW");
  EXPECT_NE(src.find("__launch_bounds__(kSm90Threads, 1)"), std::string::npos) << src;
  EXPECT_NE(src.find("attn_fwd_sm90<FlexVariant, bf16, 64, 64, true, true>(p)"), std::string::npos) << src;
}

// The set records the narrow tile and the persistent form its source was generated with, and keeps them when the
// switches change afterwards (the launch follows the set: runtime/attention_cuda.cc).
TEST_F(Sm90TallCompile, TheSetRecordsItsTileAndFormAsGenerated) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 64, 64, 1};
  const Variant relbias = corpus::build_variant(corpus::corpus_entry("relbias(learnable)"), shape).variant;
  const runtime::KernelSetKey key{DType::F16, 64, 64, "sm_90a", false, runtime::KernelFamily::sm90};
  setenv("FLEXATTN_SM90_NARROW", "1", 1);
  setenv("FLEXATTN_SM90_PERSISTENT", "0", 1);
  const runtime::KernelSet& a = runtime::get_kernel_set(relbias, key);
  unsetenv("FLEXATTN_SM90_NARROW");
  unsetenv("FLEXATTN_SM90_PERSISTENT");
  EXPECT_TRUE(a.sm90_fwd.narrow);
  EXPECT_FALSE(a.sm90_fwd.persistent);
  EXPECT_EQ(&runtime::get_kernel_set(relbias, key), &a);  // cached: the switches are not read again
  EXPECT_TRUE(a.sm90_fwd.narrow);
  EXPECT_FALSE(a.sm90_fwd.persistent);
  const runtime::KernelSetKey other{DType::BF16, 64, 64, "sm_90a", false, runtime::KernelFamily::sm90};
  const runtime::KernelSet& b = runtime::get_kernel_set(relbias, other);  // built with the defaults
  EXPECT_FALSE(b.sm90_fwd.narrow);
  EXPECT_TRUE(b.sm90_fwd.persistent);
}
