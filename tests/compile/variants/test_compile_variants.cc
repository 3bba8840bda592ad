// Every corpus variant compiles with NVRTC for sm_80 and sm_90a, forward and backward, without
// local-memory spills (ptxas report); literal values never change the compiled kernel. The portable
// (sm80) family throughout (`portable` = true; the Hopper families have their own tier in tests/compile/sm90).
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>
#include <vector>

#include "compile/compile_fixture.h"
#include "corpus.h"
#include "flexattn/attention.h"
#include "flexattn/error.h"
#include "flexattn/jit.h"
#include "runtime/kernel_set.h"
#include "sm80/tile_config.h"

using namespace flexattn;

namespace {

using CompileTier = compile_test::CompileTest;

void expect_no_spills(const CompileReport& r, const std::string& what) {
  ASSERT_FALSE(r.registers.empty()) << what;
  for (const auto& [fn, bytes] : r.spill_bytes) EXPECT_EQ(bytes, 0) << what << ": " << fn << " spills";
  for (const auto& [fn, regs] : r.registers) EXPECT_LE(regs, 255) << what << ": " << fn;
}

}  // namespace

TEST_F(CompileTier, EveryCorpusVariantCompilesWithoutSpills) {
  for (const corpus::CorpusEntry& c : corpus::mod_corpus()) {
    mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
    corpus::BuiltVariant b = corpus::build_variant(c, shape);
    for (const char* arch : {"sm_80", "sm_90a"})
      for (bool bwd : {false, true})
        expect_no_spills(compile_variant(b.variant, DType::BF16, 128, 128, arch, bwd, /*portable=*/true,
                                         /*deterministic=*/bwd),
                         c.name + " " + arch + (bwd ? " bwd" : " fwd"));
  }
}

TEST_F(CompileTier, HeadDimsAndDtypesCompileWithoutSpills) {
  Variant v;
  v.mask_mod = mods::causal();
  v.score_mod = mods::softcap(30);
  for (int d : {64, 96, 256})
    for (bool bwd : {false, true})
      expect_no_spills(compile_variant(v, DType::BF16, d, d, "sm_90a", bwd, true, bwd), "D=" + std::to_string(d));
  expect_no_spills(compile_variant(v, DType::F16, 128, 128, "sm_90a", true, true, true), "f16");
  expect_no_spills(compile_variant(v, DType::BF16, 64, 128, "sm_90a", true, true, true), "D=64 Dv=128");
}

// The deterministic dQ pass is a set of its own, compiled when asked for (the first deterministic backward,
// or compile_variant's `deterministic`), not with every backward: it took 25-35 % of each backward compile.
// The Hopper backward orders its own dQ reductions in deterministic mode (FLEXATTN_SM90_BWD_ORDERED_DQ) and
// needs the pass only with that switch off.
TEST_F(CompileTier, DeterministicDqPassCompilesOnlyWhenAskedFor) {
  Variant v;
  v.mask_mod = mods::causal();
  for (const char* ordered : {"1", "0"})
    for (bool portable : {true, false}) {
      setenv("FLEXATTN_SM90_BWD_ORDERED_DQ", ordered, 1);
      const CompileReport plain = compile_variant(v, DType::BF16, 128, 128, "sm_90a", true, portable);
      EXPECT_EQ(plain.registers.count("flexattn_bwd"), 1u);
      EXPECT_EQ(plain.registers.count("flexattn_bwd_dq_convert"), 1u);
      EXPECT_EQ(plain.registers.count("flexattn_bwd_dq"), 0u) << "portable=" << portable;
      const CompileReport det = compile_variant(v, DType::BF16, 128, 128, "sm_90a", true, portable, true);
      EXPECT_EQ(det.key, plain.key) << "the report keeps the main set's key";
      const bool pass = portable || std::string(ordered) == "0";
      EXPECT_EQ(det.registers.count("flexattn_bwd_dq"), pass ? 1u : 0u) << "portable=" << portable << " ordered=" << ordered;
      if (pass) {
        EXPECT_EQ(det.spill_bytes.at("flexattn_bwd_dq"), 0);
      }
    }
  unsetenv("FLEXATTN_SM90_BWD_ORDERED_DQ");
}

// Deterministic mode's buffer gradients are exact sums rounded by a kernel of their own (runtime/exact_grads.h):
// compile_variant prewarms it for a deterministic backward of a variant with buffer gradients, and only then.
TEST_F(CompileTier, DeterministicBufferGradientsPrewarmTheRoundingKernel) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 64, 64, 1};
  const corpus::BuiltVariant b = corpus::build_variant(corpus::corpus_entry("relbias(learnable)"), shape);
  ASSERT_FALSE(b.variant.grad_buffers.empty());
  const CompileReport det = compile_variant(b.variant, DType::BF16, 64, 64, "sm_80", true, true, true);
  ASSERT_EQ(det.registers.count("flexattn_exact_grad_finish"), 1u);
  EXPECT_EQ(det.spill_bytes.at("flexattn_exact_grad_finish"), 0);
  expect_no_spills(det, "relbias(learnable) deterministic");
  EXPECT_EQ(compile_variant(b.variant, DType::BF16, 64, 64, "sm_80", true, true, false)
                .registers.count("flexattn_exact_grad_finish"), 0u);
  Variant frozen;
  frozen.mask_mod = mods::causal();
  EXPECT_EQ(compile_variant(frozen, DType::BF16, 64, 64, "sm_80", true, true, true)
                .registers.count("flexattn_exact_grad_finish"), 0u);
}

TEST_F(CompileTier, LiteralValuesShareOneKernel) {
  Variant a, b;
  a.score_mod = mods::softcap(20);
  b.score_mod = mods::softcap(30);
  a.mask_mod = mods::sliding_window(128);
  b.mask_mod = mods::sliding_window(1024);
  const CompileReport ra = compile_variant(a, DType::BF16, 64, 64, "sm_80", false);
  const int64_t compiles = jit::jit_stats().compiles;
  const CompileReport rb = compile_variant(b, DType::BF16, 64, 64, "sm_80", false);
  EXPECT_EQ(ra.key, rb.key);
  EXPECT_EQ(jit::jit_stats().compiles, compiles) << "changing a literal recompiled";
}

TEST_F(CompileTier, UnsupportedHeadDimIsAClearError) {
  Variant v;
  try {
    compile_variant(v, DType::BF16, 72, 72, "sm_80", false);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "head dims: the cuda backend takes head dims that are multiples of 16 up to 256, got D=72, Dv=72");
  }
}

// No NVRTC needed: the head-dim padding rule against the backward's own tiling rule.
TEST(HeadDims, PaddedDimsAreTheSmallestTileableOnes) {
  EXPECT_EQ(cuda_padded_head_dims(40, 40).d, 64);
  EXPECT_EQ(cuda_padded_head_dims(48, 48).dv, 64);
  EXPECT_EQ(cuda_padded_head_dims(80, 80).d, 96);
  EXPECT_EQ(cuda_padded_head_dims(16, 16).d, 32);
  EXPECT_EQ(cuda_padded_head_dims(160, 160).d, 192);
  EXPECT_EQ(cuda_padded_head_dims(64, 128).d, 64);
  EXPECT_EQ(cuda_padded_head_dims(64, 128).dv, 128);
  EXPECT_EQ(cuda_padded_head_dims(256, 16).dv, 64);  // the dmax > 128 tile needs multiples of 64
  for (int d = 1; d <= 256; ++d)
    for (int dv = 1; dv <= 256; dv += 7) {
      const HeadDims h = cuda_padded_head_dims(d, dv);
      ASSERT_TRUE(kern::sm80_bwd_head_dims_ok(h.d, h.dv)) << d << " " << dv;
      ASSERT_TRUE(h.d >= d && h.dv >= dv && h.d % 16 == 0 && h.dv % 16 == 0 && h.d <= 256 && h.dv <= 256)
          << d << " " << dv;
      if (d % 16 == 0 && dv % 16 == 0 && kern::sm80_bwd_head_dims_ok(d, dv)) {
        ASSERT_TRUE(h.d == d && h.dv == dv);
      }
    }
  try {
    cuda_padded_head_dims(0, 64);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "head dims: expected 1..256, got D=0, Dv=64");
  }
}

TEST_F(CompileTier, UntileableBackwardHeadDimNamesThePadding) {
  Variant v;
  try {
    compile_variant(v, DType::BF16, 48, 48, "sm_80", true);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "head dims: the cuda backward takes multiples of 32 up to 128 or of 64 above, got D=48, "
                           "Dv=48; zero-pad q and k to D=64 and v to Dv=64 (cuda_padded_head_dims; the result is "
                           "unchanged)");
  }
  expect_no_spills(compile_variant(v, DType::BF16, 48, 48, "sm_80", false), "forward D=48");
}

// The backward's preprocess and dQ convert are one program per (dtype, D, Dv, arch), shared by every variant: a second
// variant's backward compiles its main kernel only (session 26: ~0.1 s of each backward compile before).
TEST_F(CompileTier, BackwardAuxProgramIsSharedByEveryVariant) {
  Variant a, b;
  a.score_mod = ir::score() * 0.5f + ir::kv_idx() * 0.0f;  // variants no other test compiles
  b.score_mod = ir::score() * 0.25f + ir::kv_idx() * 0.0f;
  b.mask_mod = mods::causal();
  const runtime::KernelSetKey key{DType::F16, 64, 64, "sm_80", true, runtime::KernelFamily::sm80};
  const runtime::KernelSet& sa = runtime::get_kernel_set(a, key);
  const jit::JitStats before = jit::jit_stats();
  const runtime::KernelSet& sb = runtime::get_kernel_set(b, key);
  const jit::JitStats after = jit::jit_stats();
  EXPECT_EQ((after.compiles - before.compiles) + (after.disk_hits - before.disk_hits), 1)
      << "the second variant's main kernel only";
  EXPECT_EQ(sa.aux.key, sb.aux.key);
  EXPECT_NE(sa.compiled.key, sb.compiled.key);
  EXPECT_EQ(sb.aux.kernel_names, (std::vector<std::string>{"flexattn_bwd_preprocess", "flexattn_bwd_dq_convert"}));
  EXPECT_EQ(sb.compiled.ptxas.count("flexattn_bwd_preprocess"), 0u);
  const CompileReport r = runtime::compile_report(sb);  // the report still names all three entries
  for (const char* e : {"flexattn_bwd_preprocess", "flexattn_bwd", "flexattn_bwd_dq_convert"})
    EXPECT_EQ(r.registers.count(e), 1u) << e;
}

// The aux program's preprocess holds every row's O and dO loads of a warp at once (4 rows; session 30): no spills at
// any head dim it serves.
TEST_F(CompileTier, BackwardAuxProgramLoadsItsRowsUpFront) {
  for (int d : {64, 96, 128, 256}) {
    const runtime::KernelSetKey key{DType::BF16, d, d, "sm_90a", true, runtime::KernelFamily::sm90};
    jit::KernelRequest req;
    req.prefix = "attn_bwdaux_probe_d" + std::to_string(d);
    req.source = runtime::kernel_source_bwd_aux(key);
    req.arch = "sm_90a";
    req.kernel_names = {"flexattn_bwd_preprocess", "flexattn_bwd_dq_convert"};
    const jit::CompiledKernel m = jit::get_or_compile(req);
    for (const auto& [name, info] : m.ptxas)
      EXPECT_EQ(info.spill_stores + info.spill_loads + info.stack, 0) << name << " D=" << d;
  }
}

// Concurrent requests for one kernel set (the Python forward's backward prefetch on a thread, then the step's
// own backward) compile it once: the JIT's in-process cache holds a future per key, so later requests wait
// for the compile under way.
TEST_F(CompileTier, ConcurrentRequestsForOneSetCompileOnce) {
  Variant v;
  v.score_mod = ir::score() * 0.75f + ir::q_idx() * 0.0f;  // a variant no other test compiles
  v.mask_mod = mods::causal();
  // The backward's aux program (preprocess, dQ convert) is shared by every variant of these head dims: loaded first,
  // so that the counts below see the variant's own set only.
  compile_variant(Variant(), DType::BF16, 64, 64, "sm_80", true);
  const jit::JitStats before = jit::jit_stats();
  std::vector<std::string> keys(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] { keys[size_t(i)] = compile_variant(v, DType::BF16, 64, 64, "sm_80", true).key; });
  for (std::thread& t : threads) t.join();
  const jit::JitStats after = jit::jit_stats();
  for (const std::string& k : keys) EXPECT_EQ(k, keys[0]);
  EXPECT_EQ((after.compiles - before.compiles) + (after.disk_hits - before.disk_hits), 1)
      << "one NVRTC compile (or one disk read) for four concurrent requests";
}
