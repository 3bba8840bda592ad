// FLEXATTN_SM90_POLY_EXP2 = k (fwd_softmax_sm90.cuh, common/poly_exp2.cuh): the sm90 forward with k eighths of
// its softmax exp2s on the FMA pipe compiles clean (no spill, no stack, no ptxas warning) for dense, causal,
// softcap and ALiBi at D 64 and 128, and -- when a disassembler is present -- really moves k / 8 of the
// MUFU.EX2 off the MUFU. Out-of-range values are refused with the variable's name.
#include <gtest/gtest.h>

#include <cstdlib>

#include "compile/compile_fixture.h"
#include "corpus.h"
#include "flexattn/codegen.h"
#include "flexattn/error.h"
#include "flexattn/jit.h"
#include "runtime/kernel_set.h"
#include "runtime/tma_sm90.h"
#include "sass_tools.h"

using namespace flexattn;

namespace {

using Sm90PolyCompile = compile_test::CompileTest;

std::string source_with(const Variant& v, int d, const char* poly) {
  runtime::KernelSetKey key{DType::BF16, d, d, "sm_90a", false, runtime::KernelFamily::sm90};
  if (poly) setenv("FLEXATTN_SM90_POLY_EXP2", poly, 1);
  std::string src;
  try {
    src = runtime::kernel_source_sm90(codegen::emit_cuda_variant(v, false), key);
  } catch (...) {
    unsetenv("FLEXATTN_SM90_POLY_EXP2");
    throw;
  }
  unsetenv("FLEXATTN_SM90_POLY_EXP2");
  return src;
}

}  // namespace

TEST_F(Sm90PolyCompile, PolyExp2CompilesCleanlyAndLeavesTheMufu) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
  std::string why;
  for (const char* name : {"full", "causal", "softcap:30+causal", "alibi+causal"})
    for (int d : {64, 128}) {
      const Variant v = corpus::build_variant(corpus::corpus_entry(name), shape).variant;
      const std::string what = std::string(name) + " D=" + std::to_string(d);
      int ex2[2] = {0, 0}, ffma[2] = {0, 0};
      for (int k : {0, 2}) {
        jit::KernelRequest req;
        req.prefix = "attn_fwd_sm90a_poly" + std::to_string(k) + "_d" + std::to_string(d);
        req.source = source_with(v, d, k ? "2" : nullptr);
        EXPECT_EQ(req.source.find("#define FLEXATTN_SM90_POLY_EXP2 2") != std::string::npos, k == 2) << what;
        req.arch = "sm_90a";
        req.kernel_names = {"flexattn_fwd"};
        const jit::CompiledKernel compiled = jit::get_or_compile(req);
        ASSERT_EQ(compiled.ptxas.count("flexattn_fwd"), 1u) << what << "\n" << compiled.log;
        const jit::PtxasInfo& info = compiled.ptxas.at("flexattn_fwd");
        EXPECT_EQ(info.spill_stores + info.spill_loads, 0) << what << " poly " << k;
        EXPECT_EQ(info.stack, 0) << what << " poly " << k;
        EXPECT_EQ(compiled.log.find("warning"), std::string::npos) << what << ":\n" << compiled.log;
        const std::optional<std::string> sass = testing_sass::disassemble(*compiled.cubin, &why);
        if (!sass) continue;
        EXPECT_EQ(testing_sass::count(*sass, "LDL"), 0) << what;
        ex2[k / 2] = testing_sass::count(*sass, "MUFU.EX2");
        ffma[k / 2] = testing_sass::count(*sass, "FFMA ");
      }
      if (ex2[0] == 0) continue;  // no disassembler
      // Two eighths of the row exp2s leave (16 per softmax copy of a 64 x 128 tile; the alpha and tanh
      // exp2s stay; nvdisasm 13.0, causal D=64: 594 -> 450), five FFMA each in their place.
      EXPECT_GE(ex2[0] - ex2[1], 64) << what << ": " << ex2[0] << " -> " << ex2[1];
      EXPECT_GE(ffma[1] - ffma[0], 5 * (ex2[0] - ex2[1])) << what;
    }
}

TEST_F(Sm90PolyCompile, OutOfRangeValuesAreRefusedByName) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
  const Variant v = corpus::build_variant(corpus::corpus_entry("causal"), shape).variant;
  for (const char* bad : {"5", "-1", "two"}) {
    try {
      source_with(v, 128, bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("FLEXATTN_SM90_POLY_EXP2: expected a number in [0"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(source_with(v, 128, "0").find("POLY_EXP2"), std::string::npos);
}
