// The GPU block-mask builder without a GPU: its generated source compiles with NVRTC for sm_80 and
// sm_90a for every corpus mask, within the register cap that keeps 4 CTAs per SM and without
// spills; bad arguments are reported (naming the argument) before any device is touched.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>

#include "common/block_mask_params.h"
#include "compile/compile_fixture.h"
#include "corpus.h"
#include "flexattn/block_mask_gpu.h"
#include "flexattn/codegen.h"
#include "flexattn/error.h"
#include "flexattn/ir_text.h"
#include "flexattn/jit.h"
#include "flexattn/mods.h"
#include "error_of.h"

using flexattn::test::error_of;

using namespace flexattn;

namespace {

jit::CompiledKernel compile(const ir::Expr& mask, const std::string& arch) {
  Variant v;
  v.mask_mod = mask;
  jit::KernelRequest req;
  req.prefix = "block_mask_build_test";
  req.source = block_mask_build_source(codegen::emit_cuda_variant(v, false).source);
  req.arch = arch;
  req.kernel_names = {kBlockMaskClassifyEntry};
  return jit::get_or_compile(req);
}

jit::CompiledKernel compile_compact(const std::string& arch) {
  jit::KernelRequest req;
  req.prefix = "block_mask_compact_test";
  req.source = block_mask_compact_source();
  req.arch = arch;
  req.kernel_names = {kBlockMaskCompactEntry};
  return jit::get_or_compile(req);
}

void expect_clean(const jit::CompiledKernel& k, const char* fn, const std::string& what) {
  ASSERT_TRUE(k.ptxas.count(fn)) << what << ": no ptxas report for " << fn;
  const jit::PtxasInfo& info = k.ptxas.at(fn);
  EXPECT_EQ(info.spill_stores + info.spill_loads, 0) << what << ": " << fn << " spills";
  EXPECT_LE(info.registers, 65536 / (kern::kBmThreads * kern::kBmMinBlocks)) << what << ": " << fn;
}

using BlockMaskGpuCompile = compile_test::CompileTest;

}  // namespace

TEST(BlockMaskGpuSource, ClassifyHoldsTheVariantAndCompactIsItsOwnProgram) {
  const std::string s = block_mask_build_source("struct FlexVariant { /* marker */ };");
  EXPECT_NE(s.find("#include \"common/block_mask_build.cuh\""), std::string::npos);
  EXPECT_NE(s.find("/* marker */"), std::string::npos);
  EXPECT_NE(s.find(std::string(kBlockMaskClassifyEntry) + "(const __grid_constant__ BlockMaskBuildParams p)"),
            std::string::npos);
  EXPECT_NE(s.find("block_mask_classify<FlexVariant>"), std::string::npos);
  // The compact kernel does not depend on the mask: it is not recompiled with every mask_mod.
  EXPECT_EQ(s.find(kBlockMaskCompactEntry), std::string::npos);
  const std::string c = block_mask_compact_source();
  EXPECT_NE(c.find(std::string(kBlockMaskCompactEntry) + "(const __grid_constant__ BlockMaskBuildParams p)"),
            std::string::npos);
  EXPECT_EQ(c.find("FlexVariant"), std::string::npos);
  EXPECT_EQ(c.find(kBlockMaskClassifyEntry), std::string::npos);
}

TEST_F(BlockMaskGpuCompile, EveryCorpusMaskCompilesWithoutSpills) {
  std::vector<ir::Expr> masks = {ir::Expr()};  // empty = attend everywhere
  mods::ProblemShape shape{1, 2, 2, 256, 256, 64, 64, 1};
  for (const flexattn::corpus::CorpusEntry& c : flexattn::corpus::mod_corpus())
    if (!c.mask.empty()) masks.push_back(flexattn::corpus::build_variant(c, shape).variant.mask_mod);
  masks.push_back(ir::parse("q_idx // (40 + 24 * h + 100 * b) == kv_idx // (40 + 24 * h + 100 * b)"));
  // Every mask for sm_90a; sm_80 for the first few only (each NVRTC compile takes ~1 s in CI).
  for (size_t i = 0; i < masks.size(); ++i) {
    const ir::Expr& m = masks[i];
    for (const char* arch : {"sm_90a", "sm_80"}) {
      if (i >= 3 && std::string(arch) == "sm_80") continue;
      const std::string what = (m.empty() ? std::string("true") : ir::print(m)) + " " + arch;
      expect_clean(compile(m, arch), kBlockMaskClassifyEntry, what);
    }
  }
  for (const char* arch : {"sm_90a", "sm_80"}) expect_clean(compile_compact(arch), kBlockMaskCompactEntry, arch);
}

TEST(BlockMaskGpuErrors, GeometryIsCheckedBeforeTheDevice) {
  const ir::Expr causal = mods::causal();
  DeviceBindings none;
  EXPECT_EQ(error_of([&] { build_block_mask_gpu(causal, none, 0, 1, 128, 128); }),
            "build_block_mask_gpu: B must be >= 1, got 0");
  EXPECT_EQ(error_of([&] { build_block_mask_gpu(causal, none, 1, 1, 128, 0); }),
            "build_block_mask_gpu: kv_len must be >= 1, got 0");
  EXPECT_EQ(error_of([&] { build_block_mask_gpu(causal, none, 1, 1, 128, 128, 0, 128); }),
            "build_block_mask_gpu: q_block must be >= 1, got 0");
  EXPECT_EQ(error_of([&] { build_block_mask_gpu(causal, none, 1, 1, int64_t(1) << 31, 128); }),
            "build_block_mask_gpu: q_len must be <= 2^31-1 (mask_mod takes int32 indices), got 2147483648");
  EXPECT_EQ(error_of([&] { build_block_mask_gpu_host(causal, {}, 1, int64_t(1) << 32, 128, 128); }),
            "build_block_mask_gpu: H must be <= 2^31-1 (mask_mod takes int32 indices), got 4294967296");
}

TEST(BlockMaskGpuErrors, BindingsAndModAreCheckedBeforeTheDevice) {
  const ir::Expr doc = mods::document(ir::Buffer{"doc_ids", DType::I32});
  DeviceBindings none;
  EXPECT_EQ(error_of([&] { build_block_mask_gpu(doc, none, 1, 1, 128, 128); }),
            "buffer 'doc_ids' is used by the mod but was not given");
  DeviceBindings wrong;
  int fake = 0;
  wrong.buffers["doc_ids"] = ir::BufferView{DType::I64, {128}, &fake};
  EXPECT_EQ(error_of([&] { build_block_mask_gpu(doc, wrong, 1, 1, 128, 128); }),
            "buffer 'doc_ids' holds i64 but the kernel reads i32");
  const std::string not_bool = error_of([&] { build_block_mask_gpu(ir::parse("q_idx - kv_idx"), none, 1, 1, 8, 8); });
  EXPECT_EQ(not_bool.rfind("mask_mod must return bool", 0), 0u) << not_bool;
}

TEST(BlockMaskGpuErrors, EmptyMaskObjectReportsItself) {
  GpuBlockMask m;
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.bytes(), 0u);
  EXPECT_EQ(error_of([&] { m.view(); }), "GpuBlockMask::view: the mask is empty (default-constructed)");
  EXPECT_EQ(error_of([&] { m.download(); }), "GpuBlockMask::download: the mask is empty (default-constructed)");
}
