// FLEXATTN_SM90_BWD_PERSISTENT (template argument kPersistent; docs/kernels_sm90.md, "Persistent
// backward"): the persistent sm90 backward main kernel compiles clean with NVRTC for sm_90a -- no spill,
// no stack, no ptxas warning, no local memory in the SASS, the consumers below their setmaxnreg and the
// producer warpgroup (the tile loop, the queue claim, the walk) below its own -- for every corpus variant
// on the default kernels (v2 + v3 at D = 128, the first kernel + v3 at D = 64, buffer gradients per
// warp where the variant allows), through get_kernel_set, so the spill fallbacks (per-element dQ,
// without the per-warp buffer gradients) are exercised with the switch as they are at run time.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <tuple>
#include <vector>

#include "compile/compile_fixture.h"
#include "corpus.h"
#include "flexattn/codegen.h"
#include "flexattn/jit.h"
#include "flexattn/mods.h"
#include "runtime/kernel_set.h"
#include "runtime/sm90_backward.h"
#include "sass_tools.h"
#include "sm90/tile_config_sm90_bwd.h"

using namespace flexattn;

namespace {

class Sm90BwdPersistentCompile : public compile_test::CompileTest {
 protected:
  void SetUp() override {
    compile_test::CompileTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // This process builds only persistent sets: the in-process set cache (keyed by the variant, not by
    // the switch) never holds a default one here.
    setenv("FLEXATTN_SM90_BWD_PERSISTENT", "1", 1);
  }
};

void check_set(const runtime::KernelSet& set, const std::string& what) {
  ASSERT_EQ(set.compiled.ptxas.count("flexattn_bwd"), 1u) << what << "\n" << set.compiled.log;
  const jit::PtxasInfo& info = set.compiled.ptxas.at("flexattn_bwd");
  EXPECT_EQ(info.spill_stores + info.spill_loads, 0) << what << " spills";
  EXPECT_EQ(info.stack, 0) << what << " has a stack frame";
  EXPECT_LE(info.registers, 168) << what;
  EXPECT_EQ(set.compiled.log.find("warning"), std::string::npos) << what << " ptxas warned:\n" << set.compiled.log;
  // A persistent kernel that spills is rebuilt as the default one (kernel_set.cc): then the clean checks
  // above hold for that one; the mods of the performance suite must keep the persistent kernel.
  const bool must = what.rfind("full ", 0) == 0 || what.rfind("causal ", 0) == 0 ||
                    what.rfind("sliding_window", 0) == 0 || what.rfind("prefix_lm", 0) == 0 ||
                    what.rfind("alibi+causal", 0) == 0;
  if (must) {
    EXPECT_TRUE(set.sm90_bwd_persistent) << what << ": the switch must reach the source";
  }
  if (!set.sm90_bwd_persistent) std::printf("[persistent] %s: fell back to the default kernel (spills)\n", what.c_str());
  std::string why;
  const std::optional<std::string> all = testing_sass::disassemble(*set.compiled.cubin, &why);
  if (!all) {
    std::printf("[persistent] SASS not checked: %s\n", why.c_str());
    return;
  }
  const std::string sass = testing_sass::function_sass(*all, "flexattn_bwd");
  ASSERT_FALSE(sass.empty()) << what;
  EXPECT_EQ(testing_sass::count(sass, "LDL"), 0) << what << ": local loads";
  EXPECT_EQ(testing_sass::count(sass, "STL"), 0) << what << ": local stores";
  // The tile queue's claim (one atomic per take) and the L2 prefetch of the next tile's K / V.
  if (set.sm90_bwd_persistent) {
    EXPECT_GT(testing_sass::count(sass, "ATOMG"), 0) << what << ": tile-queue atomic";
    EXPECT_GT(testing_sass::count(sass, "UTMAPF"), 0) << what << ": K / V prefetch into L2";
  }
  const bool bulk = set.sm90_dq_bulk, v2 = set.sm90_bwd_v2;
  const int maxr = testing_sass::max_register(sass);
  EXPECT_LT(maxr, kern::sm90_bwd_consumer_regs(bulk, v2)) << what;
  const std::optional<int> producer = testing_sass::producer_max_register(sass);
  ASSERT_TRUE(producer.has_value()) << what << ": no setmaxnreg.dec before the last EXIT";
  const int prod = *producer;
  EXPECT_LT(prod, kern::sm90_bwd_producer_regs(bulk, v2)) << what;
  std::printf("[persistent] %s: persistent %d bulk %d v2 %d tma %d, %d registers, max register R%d, producer R%d\n",
              what.c_str(), set.sm90_bwd_persistent, bulk, v2, set.sm90_bwd_dq_tma, info.registers, maxr, prod);
}

const runtime::KernelSet& compile(const Variant& v, DType t, int d, int dv) {
  return runtime::get_kernel_set(v, runtime::KernelSetKey{t, d, dv, "sm_90a", true, runtime::KernelFamily::sm90});
}

}  // namespace

TEST_F(Sm90BwdPersistentCompile, EveryCorpusVariantCompilesCleanlyAtD128AndD64) {
  for (int d : {128, 64}) {
    for (const corpus::CorpusEntry& c : corpus::mod_corpus()) {
      mods::ProblemShape shape{1, 4, 4, 256, 256, d, d, 1};
      const Variant v = corpus::build_variant(c, shape).variant;
      check_set(compile(v, DType::BF16, d, d), c.name + " D=" + std::to_string(d));
    }
  }
}

TEST_F(Sm90BwdPersistentCompile, HeadDimsAndDtypesCompileCleanly) {
  Variant sc;
  sc.mask_mod = mods::causal();
  sc.score_mod = mods::softcap(30);
  for (auto [d, dv, t] : {std::tuple{128, 64, DType::BF16}, {64, 128, DType::BF16}, {128, 128, DType::F16},
                          {64, 64, DType::F16}}) {
    check_set(compile(sc, t, d, dv), "softcap+causal D=" + std::to_string(d) + " Dv=" + std::to_string(dv) +
                                         (t == DType::F16 ? " f16" : " bf16"));
  }
}
