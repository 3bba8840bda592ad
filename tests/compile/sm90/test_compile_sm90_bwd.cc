// The sm90 backward set compiles with NVRTC for sm_90a, for every corpus variant (learnable buffers
// included, so buffer_grad is in the kernel) and the head dims / dtypes it supports: the Hopper main
// kernel has no spills, no stack, no ptxas warning (none of the wgmma serialization warnings
// C7510-C7515, no ignored setmaxnreg C7508); the sm80 entries of the set (preprocess, deterministic dQ
// pass, convert) compile for sm_90a too. When cuobjdump is available: HGMMA (with a transposed A for
// dQ = dS K), TMA loads, both setmaxnreg, red.v2 for dQ, and no local memory. The same for the opt-in
// bulk dQ path (FLEXATTN_SM90_BWD_DQ_BULK, the default), whose dQ leaves through UBLKRED instead of REDG.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "compile/compile_fixture.h"
#include "corpus.h"
#include "flexattn/codegen.h"
#include "flexattn/jit.h"
#include "runtime/kernel_set.h"
#include "runtime/sm90_backward.h"
#include "sass_tools.h"
#include "sm90_bwd_build.h"
#include "sm90/tile_config_sm90_bwd.h"

using namespace flexattn;

namespace {

using Sm90BwdCompile = compile_test::CompileTest;

const runtime::KernelSet& compile_bwd(const Variant& v, DType t, int d, int dv) {
  runtime::KernelSetKey key{t, d, dv, "sm_90a", true, runtime::KernelFamily::sm90};
  return runtime::get_kernel_set(v, key);
}

using sm90_test::expect_clean;

// The first sm90 backward kernel with one dQ path, chosen explicitly: FLEXATTN_SM90_BWD_DQ_BULK=1 (the default: shared dQ tile and bulk
// reductions) or =0 (red.global.add per element). The in-process set cache (get_kernel_set) is keyed by
// the variant's (interned) nodes, not by the flag, so the set is generated and compiled here the way
// get_kernel_set does it, bypassing that cache; the disk cache is keyed by the source, which carries the flag.
// v3 (with bulk): FLEXATTN_SM90_BWD_V3=1 as well, the first kernel's dQ tiles by TMA tensor reductions.
runtime::KernelSet compile_bwd_dq_path(const Variant& v, DType t, int d, int dv, bool bulk, bool v3 = false) {
  // V3 is on by default since session 5; V2 = 0: the first kernel (v2, the default at D=128, has its own
  // tests below).
  const sm90_test::BwdBuild b = sm90_test::compile_bwd_with(
      v, t, d, dv,
      std::string("attn_bwd_sm90a_dq") + (bulk ? "bulk" : "red") + (v3 ? "v3" : "") + "_test_d" + std::to_string(d) +
          "_dv" + std::to_string(dv),
      {{"FLEXATTN_SM90_BWD_DQ_BULK", bulk}, {"FLEXATTN_SM90_BWD_V3", v3}, {"FLEXATTN_SM90_BWD_V2", false}});
  const char* args = bulk && v3 ? ", true, false, true>(p)" : ", true>(p)";
  EXPECT_EQ(b.source.find(args) != std::string::npos, bulk) << "the flag must reach the source";
  EXPECT_EQ(runtime::sm90_bwd_source_choice(b.source).dq_tma, bulk && v3);
  return b.set;
}

}  // namespace

TEST_F(Sm90BwdCompile, EveryCorpusVariantCompilesCleanly) {
  for (const corpus::CorpusEntry& c : corpus::mod_corpus()) {
    mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
    corpus::BuiltVariant b = corpus::build_variant(c, shape);
    expect_clean(compile_bwd(b.variant, DType::BF16, 128, 128), c.name + " D=128");
  }
}

// The bulk dQ path is the default, but a variant whose bulk main kernel would spill takes the
// per-element path (get_kernel_set compiles it instead; the launch sizes shared memory from the set).
// The first sm90 backward kernel (FLEXATTN_SM90_BWD_V2=0) spills on the bulk dQ path for the heaviest
// mods at D=128 (relbias(learnable): get_kernel_set then takes its per-element path); the v2 kernel, the
// default at D=128, compiles them clean with bulk dQ and keeps it.
TEST_F(Sm90BwdCompile, BulkDqFallsBackToThePerElementPathWhereItWouldSpill) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
  const Variant heavy = corpus::build_variant(corpus::corpus_entry("relbias(learnable)"), shape).variant;
  EXPECT_TRUE(compile_bwd(heavy, DType::BF16, 128, 128).sm90_dq_bulk) << "v2 keeps bulk dQ for relbias(learnable)";
  const runtime::KernelSet bulk = compile_bwd_dq_path(heavy, DType::BF16, 128, 128, true);
  const jit::PtxasInfo& info = bulk.compiled.ptxas.at("flexattn_bwd");
  EXPECT_GT(info.spill_stores + info.spill_loads, 0)
      << "the first kernel's bulk path no longer spills for relbias(learnable) D=128: update the fallback's comment";
}

// The TMA-store epilogue (FLEXATTN_SM90_BWD_TMA_STORE) is the first thing a spilling kernel gives up: compiled in,
// it pushed the v2's constant-relbias kernel at D = 128 in its general form (FLEXATTN_SM90_GATHER=0) over its
// registers (92 bytes, ptxas 13.0), which then fell back to the per-element dQ path (462 -> 387 TFLOP/s on the H200,
// session 12). The dense kernel keeps it.
TEST_F(Sm90BwdCompile, TmaStoreEpilogueIsDroppedBeforeTheBulkDqPath) {
  Variant rel;
  rel.score_mod = mods::relative_bias(ir::Buffer{"bias_general", DType::F32});  // a set of its own (see below)
  setenv("FLEXATTN_SM90_GATHER", "0", 1);
  const runtime::KernelSet& set = compile_bwd(rel, DType::BF16, 128, 128);
  EXPECT_EQ(runtime::kernel_source_sm90_bwd(codegen::emit_cuda_variant(rel, true), set.key).find("REL_GATHER"),
            std::string::npos);
  unsetenv("FLEXATTN_SM90_GATHER");
  expect_clean(set, "constant relbias D=128, general form");
  EXPECT_TRUE(set.sm90_dq_bulk && set.sm90_bwd_v2 && set.sm90_bwd_dq_tma) << "keeps the bulk dQ path";
  EXPECT_FALSE(set.sm90_bwd_tma_store)
      << "constant relbias D=128 (general form) no longer spills with the TMA-store epilogue: update the fallback's "
         "comments";
  Variant dense;
  const runtime::KernelSet& d = compile_bwd(dense, DType::BF16, 128, 128);
  EXPECT_TRUE(d.sm90_bwd_tma_store && d.sm90_dq_bulk);
  EXPECT_TRUE(compile_bwd(dense, DType::BF16, 256, 256).sm90_bwd_tma_store) << "the wide kernel";
}

// The constant relative bias reads its row at immediate offsets (bwd_rel_gather_sm90.cuh): one NVRTC compile and a
// clean kernel with the bulk dQ path, with and without a causal mask, where the general form went through the spill
// fallbacks (relbias + causal: four compiles, still 56-128 spilled bytes). Without a mask_mod it goes without the
// TMA-store epilogue (measured slower there), with one it keeps it. Learnable rows keep the general form.
TEST_F(Sm90BwdCompile, RelativeBiasGatherCompilesOnceAndClean) {
  for (const bool causal : {false, true}) {
    Variant rel;
    rel.score_mod = mods::relative_bias(ir::Buffer{"bias", DType::F32});
    if (causal) rel.mask_mod = mods::causal();
    const std::string what = std::string("constant relbias") + (causal ? " + causal" : "") + " D=128";
    const int64_t before = jit::jit_stats().compiles;
    const runtime::KernelSet& set = compile_bwd(rel, DType::BF16, 128, 128);
    EXPECT_LE(jit::jit_stats().compiles - before, 1) << what << ": compiled more than once";
    expect_clean(set, what);
    EXPECT_TRUE(set.sm90_dq_bulk && set.sm90_bwd_v2) << what;
    EXPECT_EQ(set.sm90_bwd_tma_store, causal) << what;
    const codegen::GeneratedVariant gen = codegen::emit_cuda_variant(rel, true);
    const std::string source = runtime::kernel_source_sm90_bwd(gen, set.key);
    EXPECT_NE(source.find("#define FLEXATTN_SM90_REL_GATHER 1"), std::string::npos) << what;
    for (int d : {64, 256}) expect_clean(compile_bwd(rel, DType::BF16, d, d), what + " at D=" + std::to_string(d));
  }
  mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
  const Variant learnable = corpus::build_variant(corpus::corpus_entry("relbias(learnable)"), shape).variant;
  const std::string source = runtime::kernel_source_sm90_bwd(codegen::emit_cuda_variant(learnable, true),
                                                             runtime::KernelSetKey{DType::BF16, 128, 128, "sm_90a", true,
                                                                                   runtime::KernelFamily::sm90});
  EXPECT_EQ(source.find("FLEXATTN_SM90_REL_GATHER"), std::string::npos) << "learnable rows take the general form";
  EXPECT_EQ(source.find("FLEXATTN_SM90_BWD_TMA_STORE"), std::string::npos)
      << "the buffer-gradient sums leave the v2's TMA-store epilogue out: its define would only change the source";
}

TEST_F(Sm90BwdCompile, HeadDimsAndDtypesCompileCleanly) {
  Variant v;
  v.mask_mod = mods::causal();
  v.score_mod = mods::softcap(30);
  for (int d : {64, 128}) {
    const runtime::KernelSet& set = compile_bwd(v, DType::BF16, d, d);
    expect_clean(set, "D=" + std::to_string(d));
    // The grouped launch order (FLEXATTN_SM90_BWD_HEAD_GROUPS, default) fits without spilling here.
    EXPECT_TRUE(set.sm90_bwd_grid_order && set.sm90_dq_bulk) << d;
  }
  expect_clean(compile_bwd(v, DType::F16, 128, 128), "f16");
  expect_clean(compile_bwd(v, DType::BF16, 64, 128), "D=64 Dv=128");
  expect_clean(compile_bwd(v, DType::BF16, 128, 64), "D=128 Dv=64");
  // The gather with a buffer gradient at the smaller head dim (more registers per entry left over).
  mods::ProblemShape shape{1, 4, 4, 256, 256, 64, 64, 1};
  corpus::BuiltVariant b = corpus::build_variant(corpus::corpus_entry("relbias(learnable)"), shape);
  expect_clean(compile_bwd(b.variant, DType::BF16, 64, 64), "relbias D=64");
}

TEST_F(Sm90BwdCompile, SassHasHopperInstructionsAndNoLocalMemory) {
  Variant v;
  v.mask_mod = mods::causal();
  for (int d : {64, 128}) {
    // The per-element dQ path (FLEXATTN_SM90_BWD_DQ_BULK=0); the default bulk path is checked below.
    const runtime::KernelSet set = compile_bwd_dq_path(v, DType::BF16, d, d, false);
    std::string why;
    const std::optional<std::string> all = testing_sass::disassemble(*set.compiled.cubin, &why);
    if (!all) GTEST_SKIP() << why;
    // Only the Hopper entry: the sm80 entries of the set have no setmaxnreg cap (the dQ pass uses 253).
    const std::optional<std::string> sass = testing_sass::function_sass(*all, "flexattn_bwd");
    const std::string what = "D=" + std::to_string(d);
    ASSERT_FALSE(sass->empty()) << what << ": no flexattn_bwd in the SASS";
    EXPECT_GT(testing_sass::count(*sass, "HGMMA.64x"), 0) << what << ": no wgmma in the SASS";
    EXPECT_GT(testing_sass::count(*sass, ".tnspA"), 0) << what << ": dQ = dS K must read dS^T MN-major";
    EXPECT_GT(testing_sass::count(*sass, ".tnspB"), 0) << what << ": dV, dK, dQ read B MN-major";
    EXPECT_GT(testing_sass::count(*sass, "UTMALDG"), 0) << what << ": no TMA load";
    EXPECT_GE(testing_sass::count(*sass, "USETMAXREG"), 2) << what << ": setmaxnreg dec + inc";
    EXPECT_GT(testing_sass::count(*sass, "REDG"), 0) << what << ": per-element dQ reduction";
    EXPECT_EQ(testing_sass::count(*sass, "LDL"), 0) << what << ": local loads";
    EXPECT_EQ(testing_sass::count(*sass, "STL"), 0) << what << ": local stores";
    // setmaxnreg 232 for the consumers: no code may name a register past R231.
    EXPECT_LT(testing_sass::max_register(*sass), kern::kSm90BwdConsumerRegs) << what;
  }
}

TEST_F(Sm90BwdCompile, DqBulkCompilesCleanlyWithBulkReductionsAndNoRed) {
  struct Case {
    const char* what;
    Variant v;
    DType t;
    int d, dv;
  };
  std::vector<Case> cases;
  {
    Variant v;
    v.mask_mod = mods::causal();
    v.score_mod = mods::softcap(30);
    for (int d : {64, 128}) cases.push_back({"softcap+causal", v, DType::BF16, d, d});
    cases.push_back({"softcap+causal f16", v, DType::F16, 128, 128});
    cases.push_back({"softcap+causal", v, DType::BF16, 64, 128});
    cases.push_back({"softcap+causal", v, DType::BF16, 128, 64});
    Variant dense;
    cases.push_back({"dense", dense, DType::BF16, 128, 128});
    mods::ProblemShape shape{1, 4, 4, 256, 256, 64, 64, 1};
    cases.push_back({"relbias(learnable)", corpus::build_variant(corpus::corpus_entry("relbias(learnable)"), shape).variant,
                     DType::BF16, 64, 64});
  }
  for (const Case& c : cases) {
    const std::string what = std::string(c.what) + " bulk D=" + std::to_string(c.d) + " Dv=" + std::to_string(c.dv);
    const runtime::KernelSet set = compile_bwd_dq_path(c.v, c.t, c.d, c.dv, true);
    expect_clean(set, what);
    const jit::PtxasInfo& info = set.compiled.ptxas.at("flexattn_bwd");
    std::printf("[dq bulk] %s: %ld registers, %ld spill stores, %ld spill loads, stack %ld\n", what.c_str(),
                (long)info.registers, (long)info.spill_stores, (long)info.spill_loads, (long)info.stack);
    std::string why;
    const std::optional<std::string> all = testing_sass::disassemble(*set.compiled.cubin, &why);
    if (!all) {
      std::printf("[dq bulk] SASS not checked: %s\n", why.c_str());
      continue;
    }
    const std::string sass = testing_sass::function_sass(*all, "flexattn_bwd");
    ASSERT_FALSE(sass.empty()) << what;
    EXPECT_GT(testing_sass::count(sass, "UBLKRED"), 0) << what << ": cp.reduce.async.bulk for dQ";
    // (buffer gradients, e.g. relbias(learnable), still add into their buffers with REDG)
    if (c.v.grad_buffers.empty()) {
      EXPECT_EQ(testing_sass::count(sass, "REDG.E.ADD.F32"), 0) << what << ": no per-element dQ reductions left";
    }
    EXPECT_GT(testing_sass::count(sass, ".tnspA"), 0) << what;
    EXPECT_EQ(testing_sass::count(sass, "LDL"), 0) << what << ": local loads";
    EXPECT_EQ(testing_sass::count(sass, "STL"), 0) << what << ": local stores";
    const int maxr = testing_sass::max_register(sass);
    EXPECT_LT(maxr, kern::kSm90BwdConsumerRegs) << what;
    std::printf("[dq bulk] %s: UBLKRED %d, HGMMA %d, max register R%d\n", what.c_str(),
                testing_sass::count(sass, "UBLKRED"), testing_sass::count(sass, "HGMMA.64x"), maxr);
  }
}

// FLEXATTN_SM90_BWD_V2=1 (D = 128): the FA3-schedule consumers. Generated and compiled bypassing the
// in-process set cache, as compile_bwd_dq_path does.
// v3: FLEXATTN_SM90_BWD_V3=1 as well (with bulk: kDqTma, the TMA tensor dQ reduce).
runtime::KernelSet compile_bwd_v2(const Variant& v, DType t, int d, int dv, bool bulk, bool v3 = false) {
  const sm90_test::BwdBuild b = sm90_test::compile_bwd_with(
      v, t, d, dv,
      std::string("attn_bwd_sm90a_v2") + (bulk ? "bulk" : "") + (v3 ? "v3" : "") + "_test_d" + std::to_string(d) +
          "_dv" + std::to_string(dv),
      {{"FLEXATTN_SM90_BWD_V2", true}, {"FLEXATTN_SM90_BWD_DQ_BULK", bulk}, {"FLEXATTN_SM90_BWD_V3", v3}});
  const char* args = bulk && v3 ? ", true, true, true>(p)" : bulk ? ", true, true>(p)" : ", false, true>(p)";
  EXPECT_NE(b.source.find(args), std::string::npos) << "the flags must reach the source";
  EXPECT_EQ(runtime::sm90_bwd_source_choice(b.source).dq_tma, bulk && v3);
  return b.set;
}

// Every corpus variant (and f16, Dv = 64), with per-element and with bulk dQ: no spill, no stack, no
// ptxas warning (in particular no C7512 wgmma serialization: the dQ (32), dK, dV accumulators and both
// A-operand register sets are live at once), and in the SASS: HGMMA with .tnspA (dQ), dQ by REDG (16 per
// thread and path) or UBLKRED (then no REDG but the buffer gradients'), no local memory, no register past
// the consumers' setmaxnreg.
TEST_F(Sm90BwdCompile, V2CompilesCleanlyForEveryCorpusVariant) {
  struct Case {
    std::string what;
    Variant v;
    DType t;
    int dv;
  };
  std::vector<Case> cases;
  for (const corpus::CorpusEntry& c : corpus::mod_corpus()) {
    mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
    cases.push_back({c.name, corpus::build_variant(c, shape).variant, DType::BF16, 128});
  }
  Variant sc;
  sc.mask_mod = mods::causal();
  sc.score_mod = mods::softcap(30);
  cases.push_back({"softcap+causal f16", sc, DType::F16, 128});
  cases.push_back({"softcap+causal Dv=64", sc, DType::BF16, 64});
  // mode 0: v2 (per-element dQ), 1: v2 + bulk dQ, 2: v3 (v2 + bulk, dQ by TMA tensor reductions).
  // FLEXATTN_TEST_SM90_BWD_V3_ONLY=1 compiles mode 2 only (the v3 check of a session without the time
  // for the whole matrix).
  const bool v3_only = std::getenv("FLEXATTN_TEST_SM90_BWD_V3_ONLY") != nullptr;
  for (const Case& c : cases)
    for (int mode : {0, 1, 2}) {
      if (v3_only && mode != 2) continue;
      const bool bulk = mode >= 1, v3 = mode == 2;
      const std::string what = c.what + (v3 ? " v3" : bulk ? " v2+bulk" : " v2") + " D=128 Dv=" + std::to_string(c.dv);
      const runtime::KernelSet set = compile_bwd_v2(c.v, c.t, 128, c.dv, bulk, v3);
      // On the per-element dQ path (232 consumer registers) the constant relative bias with a causal mask spills
      // 100 bytes with the gather and 128 in the general form (ptxas 13.0, session 15), and gelu's erf 32 bytes
      // (session 22). get_kernel_set never goes there for them: their default bulk kernel is clean (checked in the
      // other modes). Asserted, so that a clean compile shows up here.
      if ((c.what == "relbias+causal" || c.what == "text:gelu") && mode == 0) {
        const jit::PtxasInfo& info = set.compiled.ptxas.at("flexattn_bwd");
        EXPECT_GT(info.spill_stores + info.spill_loads, 0) << what << " compiles clean now: drop this exception";
        continue;
      }
      expect_clean(set, what);
      std::string why;
      const std::optional<std::string> all = testing_sass::disassemble(*set.compiled.cubin, &why);
      if (!all) {
        std::printf("[v2] SASS not checked: %s\n", why.c_str());
        continue;
      }
      const std::string sass = testing_sass::function_sass(*all, "flexattn_bwd");
      ASSERT_FALSE(sass.empty()) << what;
      EXPECT_GT(testing_sass::count(sass, ".tnspA"), 0) << what << ": dQ = dS K reads dS^T MN-major";
      if (v3) {
        // D / 32 = 4 tensor reductions per dQ tile (one per 32-column slab), no per-row bulk ones.
        EXPECT_EQ(testing_sass::count(sass, "UTMAREDG"), 4) << what << ": cp.reduce.async.bulk.tensor for dQ";
        EXPECT_EQ(testing_sass::count(sass, "UBLKRED"), 0) << what;
        if (c.v.grad_buffers.empty()) {
          EXPECT_EQ(testing_sass::count(sass, "REDG.E.ADD.F32"), 0) << what;
        }
      } else if (bulk) {
        EXPECT_GT(testing_sass::count(sass, "UBLKRED"), 0) << what << ": cp.reduce.async.bulk for dQ";
        if (c.v.grad_buffers.empty()) {
          EXPECT_EQ(testing_sass::count(sass, "REDG.E.ADD.F32"), 0) << what;
        }
      } else {
        EXPECT_GE(testing_sass::count(sass, "REDG.E.ADD.F32x2"), 16) << what << ": dQ reductions";
      }
      EXPECT_EQ(testing_sass::count(sass, "LDL"), 0) << what << ": local loads";
      EXPECT_EQ(testing_sass::count(sass, "STL"), 0) << what << ": local stores";
      const int maxr = testing_sass::max_register(sass);
      EXPECT_LT(maxr, kern::sm90_bwd_consumer_regs(bulk, true)) << what;
      // The producer warpgroup's registers: 24 with the bulk path, 40 without.
      const std::optional<int> producer = testing_sass::producer_max_register(sass);
      ASSERT_TRUE(producer.has_value()) << what << ": no setmaxnreg.dec before the last EXIT";
      const int prod = *producer;
      EXPECT_LT(prod, kern::sm90_bwd_producer_regs(bulk, true)) << what;
      std::printf("[v2] %s: HGMMA %d, REDG %d, UBLKRED %d, UTMAREDG %d, max register R%d, producer R%d\n",
                  what.c_str(), testing_sass::count(sass, "HGMMA.64x"), testing_sass::count(sass, "REDG"),
                  testing_sass::count(sass, "UBLKRED"), testing_sass::count(sass, "UTMAREDG"), maxr, prod);
    }
}

// FLEXATTN_SM90_BWD_V3=1 on the first kernel's bulk dQ path at D = 64 (the first kernel's head dim by
// default): every corpus variant at D = Dv = 64, plus f16 and D64 / Dv128. (At D = 128, only with v2 off,
// the runtime keeps the padded path: with kDqTma softcap + causal spilled 68 bytes there, NVRTC 13.0.)
// No spill, no stack, no ptxas warning (no C7510-C7515); in the SASS D / 32 UTMAREDG (one per 32-column
// slab, the writer's unrolled loop) and no UBLKRED, no per-element dQ REDG, no local memory, consumers
// below their setmaxnreg 232 and the producer warpgroup below 40.
TEST_F(Sm90BwdCompile, V3FirstKernelCompilesCleanlyForEveryCorpusVariant) {
  struct Case {
    std::string what;
    Variant v;
    DType t;
    int d, dv;
  };
  std::vector<Case> cases;
  for (const corpus::CorpusEntry& c : corpus::mod_corpus()) {
    mods::ProblemShape shape{1, 4, 4, 256, 256, 64, 64, 1};
    cases.push_back({c.name, corpus::build_variant(c, shape).variant, DType::BF16, 64, 64});
  }
  Variant sc, dense;
  sc.mask_mod = mods::causal();
  sc.score_mod = mods::softcap(30);
  cases.push_back({"softcap+causal f16", sc, DType::F16, 64, 64});
  cases.push_back({"softcap+causal", sc, DType::BF16, 64, 128});
  cases.push_back({"dense", dense, DType::BF16, 64, 128});
  for (const Case& c : cases) {
    const std::string what = c.what + " v3 first kernel D=" + std::to_string(c.d) + " Dv=" + std::to_string(c.dv);
    const runtime::KernelSet set = compile_bwd_dq_path(c.v, c.t, c.d, c.dv, true, true);
    expect_clean(set, what);
    std::string why;
    const std::optional<std::string> all = testing_sass::disassemble(*set.compiled.cubin, &why);
    if (!all) {
      std::printf("[v3 first] SASS not checked: %s\n", why.c_str());
      continue;
    }
    const std::string sass = testing_sass::function_sass(*all, "flexattn_bwd");
    ASSERT_FALSE(sass.empty()) << what;
    EXPECT_GT(testing_sass::count(sass, ".tnspA"), 0) << what;
    EXPECT_EQ(testing_sass::count(sass, "UTMAREDG"), c.d / 32) << what << ": cp.reduce.async.bulk.tensor for dQ";
    EXPECT_EQ(testing_sass::count(sass, "UBLKRED"), 0) << what;
    // (fp32 reductions: the dQ ones per element; buffer gradients add into their buffers with them. The ordered
    // dQ's semaphores are REDG.E.ADD.S32, present in every bulk dQ kernel.)
    if (c.v.grad_buffers.empty()) {
      EXPECT_EQ(testing_sass::count(sass, "REDG.E.ADD.F32"), 0) << what;
    }
    EXPECT_EQ(testing_sass::count(sass, "LDL"), 0) << what << ": local loads";
    EXPECT_EQ(testing_sass::count(sass, "STL"), 0) << what << ": local stores";
    const int maxr = testing_sass::max_register(sass);
    EXPECT_LT(maxr, kern::kSm90BwdConsumerRegs) << what;
    const std::optional<int> producer = testing_sass::producer_max_register(sass);
    ASSERT_TRUE(producer.has_value()) << what << ": no setmaxnreg.dec before the last EXIT";
    const int prod = *producer;
    EXPECT_LT(prod, kern::kSm90BwdProducerRegs) << what;
    std::printf("[v3 first] %s: %d registers, HGMMA %d, UTMAREDG %d, REDG %d, max register R%d, producer R%d\n",
                what.c_str(), set.compiled.ptxas.at("flexattn_bwd").registers, testing_sass::count(sass, "HGMMA.64x"),
                testing_sass::count(sass, "UTMAREDG"), testing_sass::count(sass, "REDG"), maxr, prod);
  }
}

// A FLEXATTN_SM90_BWD_* switch's two builds of variant v at head dim d (on, off) and their main kernels' SASS (empty
// without a disassembler).
namespace {
struct SwitchPair {
  sm90_test::BwdBuild on, off;
  std::string sass_on, sass_off;
};
SwitchPair compile_switch_pair(const Variant& v, int d, const std::string& prefix, const char* name) {
  SwitchPair r{sm90_test::compile_bwd_with(v, DType::BF16, d, d, prefix + "_on", {{name, true}}),
               sm90_test::compile_bwd_with(v, DType::BF16, d, d, prefix + "_off", {{name, false}}), "", ""};
  std::string why;
  const std::optional<std::string> a = testing_sass::disassemble(*r.on.set.compiled.cubin, &why);
  const std::optional<std::string> b = testing_sass::disassemble(*r.off.set.compiled.cubin, &why);
  if (a && b) {
    r.sass_on = testing_sass::function_sass(*a, "flexattn_bwd");
    r.sass_off = testing_sass::function_sass(*b, "flexattn_bwd");
  }
  return r;
}
}  // namespace

// FLEXATTN_SM90_BWD_DQ_SWAP (default on): the v3 dQ buffers' conflict-free store order (DqSlots, tested on the host in
// Sm90BwdHost.DqV3StoreOrderKeepsEachHalfWarpOnDistinctBanks) is in the sources unless turned off (0: the sources as before) and compiles
// clean in both v3 kernels (the first at D = 64, the v2 at D = 128, and the wide one): no spills, the same TMA
// reductions and 8-byte shared accesses, and (with a disassembler) the lane's choice of block as selects.
TEST_F(Sm90BwdCompile, DqSwapCompilesCleanlyWhereAsked) {
  Variant dense, causal;
  causal.mask_mod = mods::causal();
  for (const auto& [v, name] : {std::pair{&dense, "dense"}, std::pair{&causal, "causal"}})
    for (int d : {64, 128, 256}) {
      const std::string what = std::string(name) + " D=" + std::to_string(d);
      const SwitchPair b = compile_switch_pair(*v, d, "attn_bwd_sm90a_dq_swap_test_d" + std::to_string(d),
                                               "FLEXATTN_SM90_BWD_DQ_SWAP");
      EXPECT_NE(b.on.source.find("#define FLEXATTN_SM90_BWD_DQ_SWAP 1"), std::string::npos) << what;
      EXPECT_EQ(b.off.source.find("DQ_SWAP"), std::string::npos) << what << ": off leaves the source as it was";
      expect_clean(b.on.set, what + " swapped");
      if (b.sass_on.empty()) continue;  // no disassembler
      EXPECT_EQ(testing_sass::count(b.sass_on, "UTMAREDG"), testing_sass::count(b.sass_off, "UTMAREDG")) << what;
      EXPECT_EQ(testing_sass::count(b.sass_on, "STS.64"), testing_sass::count(b.sass_off, "STS.64")) << what;
      EXPECT_GT(testing_sass::count(b.sass_on, "SEL"), testing_sass::count(b.sass_off, "SEL")) << what;
      EXPECT_EQ(testing_sass::count(b.sass_on, "LDL") + testing_sass::count(b.sass_on, "STL"), 0) << what;
    }
}

// FLEXATTN_SM90_BWD_RANK_WARP (bwd_dq_rank_sm90.cuh): the rank warp and the writers' rank ring are compiled into every
// TMA dQ kernel with two buffers (D 64 and 128) and run in deterministic mode only; 0 compiles them out. Both clean, and
// the ring's barrier waits (the rank warp's on the stage and ring barriers, the writers' on the ring) are in the SASS.
TEST_F(Sm90BwdCompile, RankWarpCompilesCleanlyAndOut) {
  Variant dense, causal;
  causal.mask_mod = mods::causal();
  for (const auto& [v, name] : {std::pair{&dense, "dense"}, std::pair{&causal, "causal"}})
    for (int d : {64, 128}) {
      const std::string what = std::string(name) + " D=" + std::to_string(d);
      const SwitchPair b = compile_switch_pair(*v, d, "attn_bwd_sm90a_rank_warp_test_d" + std::to_string(d),
                                               "FLEXATTN_SM90_BWD_RANK_WARP");
      EXPECT_EQ(b.on.source.find("NO_RANK_WARP"), std::string::npos) << what << ": on by default";
      EXPECT_NE(b.off.source.find("#define FLEXATTN_SM90_BWD_NO_RANK_WARP 1"), std::string::npos) << what;
      expect_clean(b.on.set, what + " rank warp");
      expect_clean(b.off.set, what + " no rank warp");
      if (b.sass_on.empty()) continue;  // no disassembler
      EXPECT_GT(testing_sass::count(b.sass_on, "SYNCS.PHASECHK"), testing_sass::count(b.sass_off, "SYNCS.PHASECHK"))
          << what;
      EXPECT_EQ(testing_sass::count(b.sass_on, "UTMAREDG"), testing_sass::count(b.sass_off, "UTMAREDG")) << what;
    }
}

// FLEXATTN_SM90_BWD_DQ_CLAIM (bwd_dq_claim_sm90.cuh): a run-time choice (p.dq_claim), so every TMA dQ writer carries both
// forms: per dQ slab a 3-D tensor store beside its reduction, and the claim's compare-and-swap.
TEST_F(Sm90BwdCompile, DqClaimStoresBesideEachReduction) {
  Variant dense, causal;
  causal.mask_mod = mods::causal();
  for (const auto& [v, name] : {std::pair{&dense, "dense"}, std::pair{&causal, "causal"}})
    for (int d : {64, 128}) {
      const std::string what = std::string(name) + " D=" + std::to_string(d);
      const sm90_test::BwdBuild b = sm90_test::compile_bwd_with(*v, DType::BF16, d, d,
                                                                "attn_bwd_sm90a_dq_claim_test_d" + std::to_string(d), {});
      ASSERT_TRUE(runtime::sm90_bwd_source_choice(b.source).dq_tma) << what;
      expect_clean(b.set, what);
      std::string why;
      const std::optional<std::string> a = testing_sass::disassemble(*b.set.compiled.cubin, &why);
      if (!a) continue;  // no disassembler
      const std::string sass = testing_sass::function_sass(*a, "flexattn_bwd");
      EXPECT_EQ(testing_sass::count(sass, "UTMAREDG.3D"), d / 32) << what;
      EXPECT_EQ(testing_sass::count(sass, "UTMASTG.3D"), d / 32) << what;
      EXPECT_EQ(testing_sass::count(sass, "ATOMG.E.CAS"), 1) << what;
    }
}

TEST_F(Sm90BwdCompile, EveryHeaderCompilesOnItsOwn) {
  for (const char* h : {"sm90/tile_config_sm90_bwd.h", "sm90/bwd_layout_sm90.cuh", "sm90/bwd_gemm_sm90.cuh",
                        "sm90/bwd_producer_sm90.cuh", "sm90/bwd_consumer_sm90.cuh", "sm90/bwd_consumer_v2_sm90.cuh",
                        "sm90/attn_bwd_sm90.cuh", "sm90/ptx/bulk_reduce.cuh", "sm90/bwd_dq_claim_sm90.cuh"}) {
    jit::KernelRequest req;
    req.prefix = "sm90_bwd_header_probe";
    req.source = std::string("#include \"") + h + "\"\nextern \"C\" __global__ void probe() {}\n";
    req.arch = "sm_90a";
    req.kernel_names = {"probe"};
    EXPECT_NO_THROW(jit::get_or_compile(req)) << h;
  }
}
