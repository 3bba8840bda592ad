// The sm90 backward's wide kernel (D = Dv = 256; kernels/sm90/bwd_consumer_wide_sm90.cuh) compiles with NVRTC
// for sm_90a for every corpus variant (learnable buffers included) and f16: no spill, no stack, no ptxas warning
// (no C7510-C7515 wgmma serialization: dK, dV and dQ hold 192 accumulators per thread at once). Its source
// takes the one dQ path whatever the dQ switches say (bulk, TMA reductions), never the persistent form; the
// launch gets 64-row kv tiles. With cuobjdump: n32 HGMMAs for S^T / dP^T, n128 for dK / dV / dQ (.tnspA for
// dQ), D / 32 = 8 UTMAREDG, no local memory, consumers below setmaxnreg 240, the producer warpgroup below 24.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
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

using Sm90BwdWideCompile = compile_test::CompileTest;

using sm90_test::expect_clean;

void expect_wide_sass(const runtime::KernelSet& set, const std::string& what, bool learnable) {
  std::string why;
  const std::optional<std::string> all = testing_sass::disassemble(*set.compiled.cubin, &why);
  if (!all) {
    std::printf("[wide] SASS not checked: %s\n", why.c_str());
    return;
  }
  const std::string sass = testing_sass::function_sass(*all, "flexattn_bwd");
  ASSERT_FALSE(sass.empty()) << what;
  EXPECT_GT(testing_sass::count(sass, "HGMMA.64x32x16"), 0) << what << ": S^T / dP^T halves (n32)";
  EXPECT_GT(testing_sass::count(sass, "HGMMA.64x128x16"), 0) << what << ": dK / dV / dQ (n128)";
  EXPECT_GT(testing_sass::count(sass, ".tnspA"), 0) << what << ": dQ = dS K reads dS^T MN-major";
  EXPECT_EQ(testing_sass::count(sass, "UTMAREDG"), 8) << what << ": one TMA reduction per 32-column dQ slab";
  EXPECT_EQ(testing_sass::count(sass, "UBLKRED"), 0) << what;
  if (!learnable) {
    EXPECT_EQ(testing_sass::count(sass, "REDG.E.ADD.F32"), 0) << what << ": no per-element dQ reductions";
  }
  EXPECT_EQ(testing_sass::count(sass, "LDL"), 0) << what << ": local loads";
  EXPECT_EQ(testing_sass::count(sass, "STL"), 0) << what << ": local stores";
  const int maxr = testing_sass::max_register(sass);
  EXPECT_LT(maxr, 240) << what;
  const std::optional<int> producer = testing_sass::producer_max_register(sass);
  ASSERT_TRUE(producer.has_value()) << what << ": no setmaxnreg.dec before the last EXIT";
  const int prod = *producer;
  EXPECT_LT(prod, 24) << what;
  std::printf("[wide] %s: %d registers, HGMMA %d, UTMAREDG %d, max register R%d, producer R%d\n", what.c_str(),
              set.compiled.ptxas.at("flexattn_bwd").registers, testing_sass::count(sass, "HGMMA.64x"),
              testing_sass::count(sass, "UTMAREDG"), maxr, prod);
}

}  // namespace

TEST_F(Sm90BwdWideCompile, EveryCorpusVariantCompilesCleanly) {
  struct Case {
    std::string what;
    Variant v;
    DType t;
  };
  std::vector<Case> cases;
  for (const corpus::CorpusEntry& c : corpus::mod_corpus()) {
    mods::ProblemShape shape{1, 4, 4, 256, 256, 256, 256, 1};
    cases.push_back({c.name, corpus::build_variant(c, shape).variant, DType::BF16});
  }
  Variant sc;
  sc.mask_mod = mods::causal();
  sc.score_mod = mods::softcap(30);
  cases.push_back({"softcap+causal f16", sc, DType::F16});
  for (const Case& c : cases) {
    const std::string what = c.what + " wide D=256";
    runtime::KernelSetKey key{c.t, 256, 256, "sm_90a", true, runtime::KernelFamily::sm90};
    const runtime::KernelSet& set = runtime::get_kernel_set(c.v, key);
    EXPECT_TRUE(set.sm90_dq_bulk && set.sm90_bwd_dq_tma && !set.sm90_bwd_v2 && !set.sm90_bwd_persistent) << what;
    expect_clean(set, what);
    expect_wide_sass(set, what, !c.v.grad_buffers.empty());
  }
}

// The dQ and persistent switches do not reach the wide kernel's source (it has one dQ path, no persistent form).
TEST_F(Sm90BwdWideCompile, SwitchesThatDoNotApplyLeaveTheSourceAlone) {
  Variant v;
  v.mask_mod = mods::causal();
  const sm90_test::BwdBuild b = sm90_test::compile_bwd_with(
      v, DType::BF16, 256, 256, "attn_bwd_sm90a_wide_switch_test",
      {{"FLEXATTN_SM90_BWD_DQ_BULK", false}, {"FLEXATTN_SM90_BWD_V3", false}, {"FLEXATTN_SM90_BWD_PERSISTENT", true}});
  EXPECT_NE(b.source.find("attn_bwd_sm90<FlexVariant, bf16, 256, 256, true, false, true>(p)"), std::string::npos)
      << b.source.substr(b.source.rfind("flexattn_bwd("));
  const runtime::Sm90BwdChoice choice = runtime::sm90_bwd_source_choice(b.source);
  EXPECT_TRUE(choice.dq_bulk && choice.dq_tma && !choice.v2 && !choice.persistent);
  expect_clean(b.set, "causal with the switches");
}
