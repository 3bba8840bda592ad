// FLEXATTN_SM90_BWD_BG_REDUCE (kernels/sm90/bwd_buffer_grad_sm90.cuh): the sm90 backward with buffer
// gradients summed per warp compiles clean (no spill, no stack, no ptxas warning) for the variants whose
// gradient index is diagonal (relbias, T5) or tile-uniform (alibi_slopes), on both consumers (v2 at
// D = 128, the first kernel at D = 64) and both dQ paths, and its SASS has the warp reduction's shuffles
// and a handful of buffer-gradient REDG instead of one per accumulator entry. The switch reaches the
// source only for variants that can use it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "compile/compile_fixture.h"
#include "corpus.h"
#include "flexattn/codegen.h"
#include "flexattn/jit.h"
#include "flexattn/mods.h"
#include "runtime/kernel_set.h"
#include "runtime/sm90_backward.h"
#include "sass_tools.h"
#include "sm90_bwd_build.h"
#include "sm90/tile_config_sm90_bwd.h"

using namespace flexattn;

namespace {

using Sm90BwdBgCompile = compile_test::CompileTest;

Variant learnable(const char* mask, const char* score, const char* buffer) {
  Variant v;
  if (mask) v.mask_mod = mods::lookup_mask(mask).expr;
  v.score_mod = mods::lookup_score(score).expr;
  v.grad_buffers = {buffer};
  return v;
}

struct Built {
  std::string source;
  jit::CompiledKernel compiled;
};

// The bf16 set with the given switches (sm90_test::compile_bwd_with).
Built compile(const Variant& v, int d, bool bulk, bool v2, bool bg) {
  sm90_test::BwdBuild b = sm90_test::compile_bwd_with(
      v, DType::BF16, d, d, std::string("attn_bwd_sm90a_bg_test_d") + std::to_string(d),
      {{"FLEXATTN_SM90_BWD_V2", v2}, {"FLEXATTN_SM90_BWD_DQ_BULK", bulk}, {"FLEXATTN_SM90_BWD_BG_REDUCE", bg}});
  return {std::move(b.source), std::move(b.set.compiled)};
}

}  // namespace

TEST(Sm90BwdBgSource, TheSwitchReachesOnlyVariantsThatCanUseIt) {
  const runtime::KernelSetKey key{DType::BF16, 128, 128, "sm_90a", true, runtime::KernelFamily::sm90};
  const Variant rel = learnable(nullptr, "relbias", "bias");
  Variant dense;
  dense.mask_mod = mods::causal();
  for (const char* on : {"0", "1"}) {
    setenv("FLEXATTN_SM90_BWD_BG_REDUCE", on, 1);
    const std::string a = runtime::kernel_source_sm90_bwd(codegen::emit_cuda_variant(rel, true), key);
    const std::string b = runtime::kernel_source_sm90_bwd(codegen::emit_cuda_variant(dense, true), key);
    EXPECT_EQ(a.find("#define FLEXATTN_SM90_BWD_BG_REDUCE 1") != std::string::npos, on[0] == '1') << a;
    EXPECT_EQ(b.find("FLEXATTN_SM90_BWD_BG_REDUCE"), std::string::npos) << b;
  }
  unsetenv("FLEXATTN_SM90_BWD_BG_REDUCE");
  EXPECT_TRUE(runtime::sm90_bwd_bg_reduce_requested()) << "on by default since session 5";
}

TEST_F(Sm90BwdBgCompile, ReducedBufferGradientsCompileCleanly) {
  struct Case {
    const char* what;
    Variant v;
    int kind;         // codegen's buffer_grad_reduce
    bool all_paths;   // also the non-default dQ paths (relbias); else the defaults (bulk dQ) only
  };
  const std::vector<Case> cases = {
      {"relbias", learnable(nullptr, "relbias", "bias"), 2, true},
      {"t5", learnable(nullptr, "t5", "t5_bias"), 2, false},
      {"t5:16:64+causal", learnable("causal", "t5:16:64", "t5_bias"), 2, false},
      {"alibi_slopes+causal", learnable("causal", "alibi_slopes", "slopes"), 1, false},
  };
  struct Path {
    int d;
    bool bulk, v2;
    bool reduced;  // v2 reduces only with the bulk path's 240 registers (at 232 t5 spilled)
  };
  // D = 128: v2 (the default) with both dQ paths; D = 64: the first kernel with both.
  for (const Case& c : cases) {
    ASSERT_EQ(codegen::emit_cuda_variant(c.v, true).buffer_grad_reduce, c.kind) << c.what;
    for (const Path& path : {Path{128, true, true, true}, Path{128, false, true, false}, Path{64, true, false, true},
                             Path{64, false, false, true}}) {
      if (!path.bulk && !c.all_paths) continue;  // (each set compiles twice: ~10 s on 2 cores)
      const std::string what = std::string(c.what) + " D=" + std::to_string(path.d) + (path.v2 ? " v2" : "") +
                               (path.bulk ? " bulk" : " red");
      const Built on = compile(c.v, path.d, path.bulk, path.v2, true);
      ASSERT_NE(on.source.find("#define FLEXATTN_SM90_BWD_BG_REDUCE 1"), std::string::npos) << what;
      ASSERT_EQ(on.compiled.ptxas.count("flexattn_bwd"), 1u) << what << "\n" << on.compiled.log;
      const jit::PtxasInfo& info = on.compiled.ptxas.at("flexattn_bwd");
      EXPECT_EQ(info.spill_stores + info.spill_loads, 0) << what << " spills";
      EXPECT_EQ(info.stack, 0) << what << " stack";
      EXPECT_LE(info.registers, 168) << what;
      EXPECT_EQ(on.compiled.log.find("warning"), std::string::npos) << what << ":\n" << on.compiled.log;
      std::string why;
      const std::optional<std::string> all = testing_sass::disassemble(*on.compiled.cubin, &why);
      if (!all) {
        std::printf("[bg] %s: SASS not checked: %s\n", what.c_str(), why.c_str());
        continue;
      }
      const std::string sass = testing_sass::function_sass(*all, "flexattn_bwd");
      const Built off = compile(c.v, path.d, path.bulk, path.v2, false);
      const std::optional<std::string> all_off = testing_sass::disassemble(*off.compiled.cubin, &why);
      ASSERT_TRUE(all_off.has_value()) << why;
      const std::string sass_off = testing_sass::function_sass(*all_off, "flexattn_bwd");
      const int red_on = testing_sass::count(sass, "REDG.E.ADD.F32.FTZ.RN"), red_off = testing_sass::count(sass_off, "REDG.E.ADD.F32.FTZ.RN");
      const int shfl = testing_sass::count(sass, "SHFL");
      // Per entry the off kernel has one scalar RED per accumulator entry and tile kind (32 each); the
      // reduced one keeps those of the edge-tile kinds (full, and partial with a mask_mod) and has at most 4 for
      // all interior kinds: per warpgroup diagonal one (bg_wg_flush: the v2 kernel's one call, the first kernel's
      // two, at the next tile and at the walk's end), per warp (u, cb) 4 (bg_flush), or 1 (uniform) (the dQ
      // path's REDs are not scalar F32).
      EXPECT_GE(red_off, 32) << what;
      if (path.reduced) {
        const int edge_kinds = c.v.mask_mod.empty() ? 1 : 2;
        EXPECT_LE(red_on, 32 * edge_kinds + (c.kind == 2 ? 4 : 1)) << what;
        EXPECT_GE(shfl, c.kind == 2 ? 20 : 5) << what;
      } else {
        EXPECT_EQ(red_on, red_off) << what;
      }
      EXPECT_EQ(testing_sass::count(sass, "LDL"), 0) << what;
      EXPECT_EQ(testing_sass::count(sass, "STL"), 0) << what;
      const int maxr = testing_sass::max_register(sass);
      EXPECT_LT(maxr, kern::sm90_bwd_consumer_regs(path.bulk, path.v2)) << what;
      std::printf("[bg] %s: regs %ld, max R%d, SASS lines %d -> %d, buffer REDG %d -> %d, SHFL %d\n", what.c_str(),
                  (long)info.registers, maxr, testing_sass::count(sass_off, "\n"), testing_sass::count(sass, "\n"),
                  red_off, red_on, shfl);
    }
  }
}

TEST_F(Sm90BwdBgCompile, HeaderCompilesOnItsOwn) {
  jit::KernelRequest req;
  req.prefix = "sm90_bwd_bg_header_probe";
  req.source = "#include \"sm90/bwd_buffer_grad_sm90.cuh\"\nextern \"C\" __global__ void probe() {}\n";
  req.arch = "sm_90a";
  req.kernel_names = {"probe"};
  EXPECT_NO_THROW(jit::get_or_compile(req));
}
