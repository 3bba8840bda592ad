// The sm90 forward compiles with NVRTC for sm_90a, for every corpus variant and the head dims / dtypes
// it supports: no spills, no stack, no ptxas warning (in particular none of the wgmma serialization
// warnings C7510-C7515 and no ignored setmaxnreg, C7508), and -- when cuobjdump is available -- SASS
// with HGMMA, TMA loads and stores, both setmaxnreg and no local memory.
#include <gtest/gtest.h>

#include <cstdlib>
#include <tuple>
#include <utility>

#include "compile/compile_fixture.h"
#include "corpus.h"
#include "flexattn/attention.h"
#include "flexattn/codegen.h"
#include "flexattn/error.h"
#include "flexattn/jit.h"
#include "runtime/kernel_set.h"
#include "runtime/tma_sm90.h"
#include "sass_tools.h"
#include "sm90_fwd_build.h"
#include "sm90/tile_config_sm90.h"

using namespace flexattn;

namespace {

using Sm90Compile = compile_test::CompileTest;

const runtime::KernelSet& compile_sm90(const Variant& v, DType t, int d, int dv) {
  runtime::KernelSetKey key{t, d, dv, "sm_90a", false, runtime::KernelFamily::sm90};
  return runtime::get_kernel_set(v, key);
}

// The persistent kernel (FLEXATTN_SM90_PERSISTENT=1): the source generator reads the flag, and the
// kernel-set cache is keyed without it, so the source is compiled here directly.
jit::CompiledKernel compile_sm90_persistent(const Variant& v, DType t, int d, int dv) {
  runtime::KernelSetKey key{t, d, dv, "sm_90a", false, runtime::KernelFamily::sm90};
  setenv("FLEXATTN_SM90_PERSISTENT", "1", 1);
  const std::string source = runtime::kernel_source_sm90(codegen::emit_cuda_variant(v, false), key);
  unsetenv("FLEXATTN_SM90_PERSISTENT");
  EXPECT_NE(source.find(", true>(p); }"), std::string::npos) << source;
  return sm90_test::compile_fwd_source("attn_fwd_sm90a_persistent_d" + std::to_string(d) + "_dv" + std::to_string(dv),
                                       source);
}

// Everything the compile tier can say about one kernel without running it.
void expect_clean(const jit::CompiledKernel& compiled, const std::string& what) {
  ASSERT_EQ(compiled.ptxas.count("flexattn_fwd"), 1u) << what << "\n" << compiled.log;
  const jit::PtxasInfo& info = compiled.ptxas.at("flexattn_fwd");
  EXPECT_EQ(info.spill_stores + info.spill_loads, 0) << what << " spills";
  EXPECT_EQ(info.stack, 0) << what << " has a stack frame";
  // __launch_bounds__(384, 1): the entry allocation is capped at 65536 / 384 rounded down to 8.
  EXPECT_LE(info.registers, 168) << what;
  EXPECT_EQ(compiled.log.find("warning"), std::string::npos) << what << " ptxas warned:\n" << compiled.log;
  EXPECT_EQ(compiled.log.find("serialized"), std::string::npos) << what << ":\n" << compiled.log;
}

void expect_clean(const runtime::KernelSet& set, const std::string& what) { expect_clean(set.compiled, what); }

// The SASS facts the design relies on (see SassHasHopperInstructionsAndNoLocalMemory).
void expect_hopper_sass(const std::string& sass, const std::string& what) {
  EXPECT_GT(testing_sass::count(sass, "HGMMA.64x"), 0) << what << ": no wgmma in the SASS";
  EXPECT_GT(testing_sass::count(sass, ".tnspB"), 0) << what << ": P V must read V MN-major";
  EXPECT_GT(testing_sass::count(sass, "UTMALDG"), 0) << what << ": no TMA load";
  EXPECT_GT(testing_sass::count(sass, "UTMASTG"), 0) << what << ": no TMA store";
  EXPECT_EQ(testing_sass::count(sass, "USETMAXREG"), 2) << what << ": setmaxnreg dec + inc";
  // The overlap of softmax and P V: a wait that leaves one wgmma group in flight.
  EXPECT_GT(testing_sass::count(sass, "WARPGROUP.DEPBAR.LE gsb0, 0x1"), 0) << what;
  EXPECT_EQ(testing_sass::count(sass, "LDL"), 0) << what << ": local loads";
  EXPECT_EQ(testing_sass::count(sass, "STL"), 0) << what << ": local stores";
  // setmaxnreg 240 for the consumers: no code may name a register past R239.
  EXPECT_LT(testing_sass::max_register(sass), kern::kSm90ConsumerRegs) << what;
}

}  // namespace

TEST_F(Sm90Compile, EveryCorpusVariantCompilesCleanly) {
  for (const corpus::CorpusEntry& c : corpus::mod_corpus()) {
    mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
    corpus::BuiltVariant b = corpus::build_variant(c, shape);
    expect_clean(compile_sm90(b.variant, DType::BF16, 128, 128), c.name);
  }
}

// The persistent kernel of every corpus mod at D=128: its producer takes tile indices from the tile
// queue (per-thread atomicAdd results, made uniform again by fwd_uniform) and must still fit setmaxnreg
// 24 with no spill; the consumers keep 240.
TEST_F(Sm90Compile, EveryCorpusVariantCompilesCleanlyPersistent) {
  for (const corpus::CorpusEntry& c : corpus::mod_corpus()) {
    mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
    corpus::BuiltVariant b = corpus::build_variant(c, shape);
    expect_clean(compile_sm90_persistent(b.variant, DType::BF16, 128, 128), "persistent " + c.name);
  }
}

TEST_F(Sm90Compile, HeadDimsAndDtypesCompileCleanly) {
  Variant v;
  v.mask_mod = mods::causal();
  v.score_mod = mods::softcap(30);
  for (int d : {64, 128, 192, 256}) expect_clean(compile_sm90(v, DType::BF16, d, d), "D=" + std::to_string(d));
  expect_clean(compile_sm90(v, DType::F16, 128, 128), "f16");
  expect_clean(compile_sm90(v, DType::BF16, 64, 128), "D=64 Dv=128");
  expect_clean(compile_sm90(v, DType::BF16, 256, 64), "D=256 Dv=64");
}

TEST_F(Sm90Compile, SassHasHopperInstructionsAndNoLocalMemory) {
  Variant v;
  v.mask_mod = mods::causal();
  for (int d : {64, 128, 256}) {
    const runtime::KernelSet& set = compile_sm90(v, DType::BF16, d, d);
    std::string why;
    const std::optional<std::string> sass = testing_sass::disassemble(*set.compiled.cubin, &why);
    if (!sass) GTEST_SKIP() << why;
    expect_hopper_sass(*sass, "D=" + std::to_string(d));
  }
}

// The persistent kernel (two Q buffers at D <= 128, one above; kv-tile counts instead of the end
// marker): the same bar for dense, causal, document and a buffer-reading (narrow-tile) mod.
TEST_F(Sm90Compile, PersistentKernelCompilesCleanly) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
  const Variant dense;
  const Variant causal = corpus::build_variant(corpus::corpus_entry("causal"), shape).variant;
  const Variant document = corpus::build_variant(corpus::corpus_entry("document:3"), shape).variant;
  const Variant relbias = corpus::build_variant(corpus::corpus_entry("relbias(learnable)"), shape).variant;
  struct Case {
    const Variant* v;
    const char* name;
    int d, dv;
  };
  std::string why;
  bool have_sass = true;
  for (const Case& k : {Case{&dense, "dense", 64, 64}, Case{&causal, "causal", 64, 64}, Case{&document, "document", 64, 64},
                        Case{&dense, "dense", 128, 128}, Case{&causal, "causal", 128, 128},
                        Case{&document, "document", 128, 128}, Case{&relbias, "relbias (narrow)", 128, 128},
                        Case{&causal, "causal", 256, 256}}) {
    const std::string what = std::string("persistent ") + k.name + " D=" + std::to_string(k.d);
    const jit::CompiledKernel compiled = compile_sm90_persistent(*k.v, DType::BF16, k.d, k.dv);
    expect_clean(compiled, what);
    if (!have_sass) continue;
    const std::optional<std::string> sass = testing_sass::disassemble(*compiled.cubin, &why);
    if (!sass) {
      have_sass = false;
      continue;
    }
    expect_hopper_sass(*sass, what);
    // The tile queue: one atomic add per tile (and the exchange that leaves the word at 0), its result
    // moved to a uniform register (fwd_uniform).
    EXPECT_EQ(testing_sass::count(*sass, "ATOMG.E.ADD"), 1) << what;
    EXPECT_EQ(testing_sass::count(*sass, "ATOMG.E.EXCH"), 1) << what;
    EXPECT_GE(testing_sass::count(*sass, "REDUX.OR UR"), 1) << what;
  }
  if (!have_sass) GTEST_SKIP() << "SASS not checked: " << why;
}

// FLEXATTN_SM90_EARLY_CLAIM = k: the persistent producer claims its next tile inside the tile's kv loop (k kv
// tiles before its end) or, for a tile without kv tiles, after it: atomics in both places, and the producer still
// fits its 24 registers (two Q buffers at D = 128, one at D = 256). Another value is refused with the variable's
// name.
TEST_F(Sm90Compile, EarlyClaimCompilesCleanly) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
  const Variant causal = corpus::build_variant(corpus::corpus_entry("causal"), shape).variant;
  const Variant document = corpus::build_variant(corpus::corpus_entry("document:3"), shape).variant;
  std::string why;
  for (const auto& [v, name, d] : {std::tuple{&document, "document", 128}, std::tuple{&causal, "causal", 256}}) {
    const std::string what = std::string("early claim ") + name + " D=" + std::to_string(d);
    setenv("FLEXATTN_SM90_EARLY_CLAIM", "2", 1);
    const jit::CompiledKernel compiled = compile_sm90_persistent(*v, DType::BF16, d, d);
    unsetenv("FLEXATTN_SM90_EARLY_CLAIM");
    expect_clean(compiled, what);
    const std::optional<std::string> sass = testing_sass::disassemble(*compiled.cubin, &why);
    if (!sass) continue;
    // The loop's claim (inlined twice where one Q buffer puts the Q load after the first K/V) and the late one.
    EXPECT_EQ(testing_sass::count(*sass, "ATOMG.E.ADD"), d == 256 ? 3 : 2) << what;
    EXPECT_GE(testing_sass::count(*sass, "REDUX.OR UR"), 1) << what;
  }
  runtime::KernelSetKey key{DType::BF16, 128, 128, "sm_90a", false, runtime::KernelFamily::sm90};
  setenv("FLEXATTN_SM90_EARLY_CLAIM", "5", 1);
  try {
    (void)runtime::kernel_source_sm90(codegen::emit_cuda_variant(causal, false), key);
    ADD_FAILURE() << "FLEXATTN_SM90_EARLY_CLAIM=5 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("FLEXATTN_SM90_EARLY_CLAIM"), std::string::npos) << e.what();
  }
  unsetenv("FLEXATTN_SM90_EARLY_CLAIM");
  if (why.size()) GTEST_SKIP() << "SASS not checked: " << why;
}

// The consumer's kv loop (rotated around one softmax call site since session 26; the peeled loop, two call sites, was
// removed in session 29): clean at every tile form (default and persistent, D 64 / 128 / 256, the tall tile, its ALiBi
// since session 27) with the overlap's wait for one group kept.
TEST_F(Sm90Compile, KvLoopCompilesCleanlyAtEveryForm) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
  std::string why;
  struct Case {
    const char* name;
    int d;
    bool persistent, tall;
  };
  for (const Case& k : {Case{"document:3", 128, true, false}, Case{"softcap:30+causal", 128, false, false},
                        Case{"full", 128, true, false}, Case{"full", 64, true, true}, Case{"causal", 256, true, false},
                        Case{"alibi+causal", 64, false, true}}) {
    const Variant v = corpus::build_variant(corpus::corpus_entry(k.name), shape).variant;
    const std::string what = std::string(k.name) + " D=" + std::to_string(k.d) + (k.persistent ? " persistent" : "") +
                             (k.tall ? " tall" : "");
    runtime::KernelSetKey key{DType::BF16, k.d, k.d, "sm_90a", false, runtime::KernelFamily::sm90};
    key.sm90_fwd_tall = k.tall;
    const codegen::GeneratedVariant gen = codegen::emit_cuda_variant(v, false);
    setenv("FLEXATTN_SM90_PERSISTENT", k.persistent ? "1" : "0", 1);
    const runtime::Sm90FwdForm form = runtime::sm90_fwd_form(gen, key);
    const std::string src = runtime::kernel_source_sm90_fwd(gen, key, form);
    unsetenv("FLEXATTN_SM90_PERSISTENT");
    EXPECT_EQ(form.tall, k.tall) << what;
    const jit::CompiledKernel a =
        sm90_test::compile_fwd_source("attn_fwd_sm90a_kv_loop_d" + std::to_string(k.d), src);
    expect_clean(a, what);
    const std::optional<std::string> sass = testing_sass::disassemble(*a.cubin, &why);
    if (sass) expect_hopper_sass(*sass, what);
  }
  if (why.size()) GTEST_SKIP() << "SASS not checked: " << why;
}

// compile_variant (cache prewarm, the benchmark's up-front compiles) compiles what a call would run:
// on sm_90a the Hopper families unless switched off or asked for the portable one.
TEST_F(Sm90Compile, CompileVariantTakesTheFamilyTheDispatchWould) {
  Variant v;
  v.mask_mod = mods::causal();
  auto prefix = [](const CompileReport& r) { return r.key.substr(0, r.key.find("_bf16")); };
  EXPECT_EQ(prefix(compile_variant(v, DType::BF16, 128, 128, "sm_90a", false)), "attn_fwd_sm90a");
  EXPECT_EQ(prefix(compile_variant(v, DType::BF16, 128, 128, "sm_90a", true)), "attn_bwd_sm90a");
  EXPECT_EQ(prefix(compile_variant(v, DType::BF16, 128, 128, "sm_90a", false, /*portable=*/true)), "attn_fwd_sm80");
  EXPECT_EQ(prefix(compile_variant(v, DType::BF16, 128, 128, "sm_80", false)), "attn_fwd_sm80");
  // 256 takes the backward's wide kernel, and 192 too with the padded backward (FLEXATTN_SM90_BWD_PAD_HEAD_DIM,
  // default on since session 32); with it off the portable family.
  EXPECT_EQ(prefix(compile_variant(v, DType::BF16, 256, 256, "sm_90a", true)), "attn_bwd_sm90a");
  EXPECT_EQ(prefix(compile_variant(v, DType::BF16, 192, 192, "sm_90a", true)), "attn_bwd_sm90a");
  setenv("FLEXATTN_SM90_BWD_PAD_HEAD_DIM", "0", 1);
  EXPECT_EQ(prefix(compile_variant(v, DType::BF16, 192, 192, "sm_90a", true)), "attn_bwd_sm80");
  unsetenv("FLEXATTN_SM90_BWD_PAD_HEAD_DIM");
  setenv("FLEXATTN_SM90", "0", 1);
  EXPECT_EQ(prefix(compile_variant(v, DType::BF16, 128, 128, "sm_90a", false)), "attn_fwd_sm80");
  unsetenv("FLEXATTN_SM90");
  // Head dim 96: the D = 128 forward kernel (the same set as a D = 128 call's), or with FLEXATTN_SM90_PAD_HEAD_DIM=0
  // the sm80 family; its backward likewise (the non-persistent D = 128 set; FLEXATTN_SM90_BWD_PAD_HEAD_DIM=0: sm80).
  setenv("FLEXATTN_SM90_PAD_HEAD_DIM", "0", 1);
  EXPECT_EQ(prefix(compile_variant(v, DType::BF16, 96, 96, "sm_90a", false)), "attn_fwd_sm80");
  EXPECT_EQ(prefix(compile_variant(v, DType::BF16, 96, 96, "sm_90a", true)), "attn_bwd_sm80");
  unsetenv("FLEXATTN_SM90_PAD_HEAD_DIM");
  const CompileReport padded = compile_variant(v, DType::BF16, 96, 96, "sm_90a", false);
  EXPECT_EQ(prefix(padded), "attn_fwd_sm90a");
  EXPECT_EQ(padded.key, compile_variant(v, DType::BF16, 128, 128, "sm_90a", false).key);
  const CompileReport padded_bwd = compile_variant(v, DType::BF16, 96, 96, "sm_90a", true);
  EXPECT_EQ(prefix(padded_bwd), "attn_bwd_sm90a");
  EXPECT_NE(padded_bwd.key.find("_d128_dv128"), std::string::npos) << padded_bwd.key;
  setenv("FLEXATTN_SM90_BWD_PAD_HEAD_DIM", "0", 1);
  EXPECT_EQ(prefix(compile_variant(v, DType::BF16, 96, 96, "sm_90a", true)), "attn_bwd_sm80");
  unsetenv("FLEXATTN_SM90_BWD_PAD_HEAD_DIM");
}

// FLEXATTN_SM90_NARROW=0: the buffer-reading mods on the wide tile (128 x 128), which the narrow rule
// kept them off while their 64-bit gather index math spilled there. The kernel-set cache is keyed without
// the flag, so the source is compiled here directly.
// ... and the forward set that call looks up: without a block mask D = Dv = 64 asks for the tall tile, with one not
// (the benchmark's prewarm compiled the usual tile for a call that then compiled the tall one: twice the cold compile).
// Here the call's lookup afterwards touches no JIT at all.
TEST_F(Sm90Compile, CompileVariantPrewarmsTheSetTheCallLooksUp) {
  Variant full;
  Variant causal;
  causal.mask_mod = mods::causal();
  for (const auto& [v, block_mask] : {std::pair<const Variant*, bool>{&full, false}, {&causal, true}}) {
    const std::string what = block_mask ? "with a block mask" : "without a block mask";
    (void)compile_variant(*v, DType::BF16, 64, 64, "sm_90a", false, false, false, block_mask);
    const runtime::KernelSetKey key = runtime::sm90_fwd_call_key(DType::BF16, 64, 64, "sm_90a", block_mask);
    EXPECT_EQ(key.sm90_fwd_tall, !block_mask) << what;
    const jit::JitStats before = jit::jit_stats();
    const runtime::KernelSet& set = runtime::get_kernel_set(*v, key);
    const jit::JitStats after = jit::jit_stats();
    EXPECT_EQ(after.compiles + after.memory_hits + after.disk_hits, before.compiles + before.memory_hits + before.disk_hits)
        << what << ": the call's set was not the prewarmed one";
    EXPECT_EQ(set.sm90_fwd.tall, !block_mask) << what;
  }
}

TEST_F(Sm90Compile, GatherModsCompileCleanlyOnTheWideTile) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
  for (const char* name : {"relbias(learnable)", "alibi_slopes(learnable)+causal", "t5", "document:3"})
    for (int d : {64, 128}) {
      const Variant v = corpus::build_variant(corpus::corpus_entry(name), shape).variant;
      runtime::KernelSetKey key{DType::BF16, d, d, "sm_90a", false, runtime::KernelFamily::sm90};
      setenv("FLEXATTN_SM90_NARROW", "0", 1);
      jit::KernelRequest req;
      req.prefix = "attn_fwd_sm90a_wide_d" + std::to_string(d);
      req.source = runtime::kernel_source_sm90(codegen::emit_cuda_variant(v, false), key);
      unsetenv("FLEXATTN_SM90_NARROW");
      // narrow = false, persistent (the default) = true
      EXPECT_NE(req.source.find(", false, true>(p); }"), std::string::npos) << req.source;
      req.arch = "sm_90a";
      req.kernel_names = {"flexattn_fwd"};
      expect_clean(jit::get_or_compile(req), std::string(name) + " wide D=" + std::to_string(d));
    }
}

TEST_F(Sm90Compile, EveryHeaderCompilesOnItsOwn) {
  for (const char* h : {"sm90/ptx/fence.cuh", "sm90/ptx/mbarrier.cuh", "sm90/ptx/setmaxnreg.cuh", "sm90/ptx/smem.cuh",
                        "sm90/ptx/tma.cuh", "sm90/ptx/wgmma.cuh", "sm90/tile_config_sm90.h", "sm90/fwd_layout_sm90.cuh",
                        "sm90/fwd_gemm_sm90.cuh", "sm90/fwd_softmax_sm90.cuh", "sm90/fwd_producer_sm90.cuh",
                        "sm90/fwd_epilogue_sm90.cuh", "sm90/fwd_consumer_sm90.cuh", "sm90/attn_fwd_sm90.cuh"}) {
    jit::KernelRequest req;
    req.prefix = "sm90_header_probe";
    req.source = std::string("#include \"") + h + "\"\nextern \"C\" __global__ void probe() {}\n";
    req.arch = "sm_90a";
    req.kernel_names = {"probe"};
    EXPECT_NO_THROW(jit::get_or_compile(req)) << h;
  }
}

TEST_F(Sm90Compile, OnlySm90aIsAccepted) {
  Variant v;
  runtime::KernelSetKey key{DType::BF16, 128, 128, "sm_80", false, runtime::KernelFamily::sm90};
  try {
    runtime::get_kernel_set(v, key);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "arch: the sm90 kernel family compiles only for sm_90a, got 'sm_80'");
  }
}

// FLEXATTN_SM90_AFFINE (on by default since session 5): ALiBi's bias as an affine function of the column (fwd_softmax_sm90.cuh). The
// ALiBi mods (formula and buffer slopes, narrow and wide tile) at D 64 and 128 compile cleanly, and the
// per-entry kv - q conversion is gone: the default kernel converts kv - q per entry (I2FP.F32.S32, 64 per
// tile fast path and as many in the partial path), the affine one only per row and tile.
TEST_F(Sm90Compile, RelAffineAlibiCompilesCleanly) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
  std::string why;
  for (const char* name : {"alibi+causal", "alibi_slopes(learnable)+causal"})
    for (int d : {64, 128})
      for (const char* narrow : {"1", "0"}) {
        const Variant v = corpus::build_variant(corpus::corpus_entry(name), shape).variant;
        runtime::KernelSetKey key{DType::BF16, d, d, "sm_90a", false, runtime::KernelFamily::sm90};
        const std::string what = std::string(name) + " D=" + std::to_string(d) + " narrow " + narrow;
        int i2f[2] = {0, 0};
        for (int affine : {0, 1}) {
          setenv("FLEXATTN_SM90_NARROW", narrow, 1);
          setenv("FLEXATTN_SM90_AFFINE", affine ? "1" : "0", 1);  // on by default since session 5
          jit::KernelRequest req;
          req.prefix = std::string("attn_fwd_sm90a_affine") + (affine ? "1" : "0") + "_n" + narrow + "_d" + std::to_string(d);
          req.source = runtime::kernel_source_sm90(codegen::emit_cuda_variant(v, false), key);
          unsetenv("FLEXATTN_SM90_NARROW");
          unsetenv("FLEXATTN_SM90_AFFINE");
          EXPECT_EQ(req.source.find("#define FLEXATTN_SM90_REL_AFFINE 1") != std::string::npos, affine == 1) << what;
          req.arch = "sm_90a";
          req.kernel_names = {"flexattn_fwd"};
          const jit::CompiledKernel compiled = jit::get_or_compile(req);
          expect_clean(compiled, what + (affine ? " affine" : ""));
          const std::optional<std::string> sass = testing_sass::disassemble(*compiled.cubin, &why);
          if (!sass) continue;
          expect_hopper_sass(*sass, what);
          i2f[affine] = testing_sass::count(*sass, "I2FP.F32.S32");
        }
        if (i2f[0] > 0) {  // rotated loop, ptxas 13.0: 66-134 without, 4-6 with
          EXPECT_LE(i2f[1] + 60, i2f[0]) << what;
        }
      }
}

// FLEXATTN_SM90_UDESC=1: the stage addresses pass through redux.sync, so the wgmma descriptors are built
// in uniform registers: clean compiles (dense, causal and ALiBi with the affine bias, D 64 and 128) and
// fewer R2UR moves than the default kernel (rotated loop, ptxas 13.0: D=64 dense 234 -> 199, causal 217 -> 199). With it
// FLEXATTN_SM90_ILP=1 (four max / sum chains in the softmax) and FLEXATTN_SM90_LAZY=1 (the O rescale
// under a warp vote), which must compile as cleanly: no wgmma serialization from the branch.
TEST_F(Sm90Compile, UniformDescriptorsCompileCleanly) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
  std::string why;
  for (const char* name : {"full", "causal", "alibi+causal"})
    for (int d : {64, 128}) {
      const Variant v = corpus::build_variant(corpus::corpus_entry(name), shape).variant;
      runtime::KernelSetKey key{DType::BF16, d, d, "sm_90a", false, runtime::KernelFamily::sm90};
      const std::string what = std::string(name) + " D=" + std::to_string(d);
      int r2ur[2] = {0, 0};
      for (int udesc : {0, 1}) {
        setenv("FLEXATTN_SM90_AFFINE", "1", 1);
        // Unset = on at D = 128 since session 5: both sides set explicitly.
        const char* on = udesc ? "1" : "0";
        setenv("FLEXATTN_SM90_UDESC", on, 1), setenv("FLEXATTN_SM90_ILP", on, 1), setenv("FLEXATTN_SM90_LAZY", on, 1);
        jit::KernelRequest req;
        req.prefix = std::string("attn_fwd_sm90a_udesc") + (udesc ? "1" : "0") + "_d" + std::to_string(d);
        req.source = runtime::kernel_source_sm90(codegen::emit_cuda_variant(v, false), key);
        unsetenv("FLEXATTN_SM90_AFFINE");
        unsetenv("FLEXATTN_SM90_UDESC");
        unsetenv("FLEXATTN_SM90_ILP");
        unsetenv("FLEXATTN_SM90_LAZY");
        EXPECT_EQ(req.source.find("#define FLEXATTN_SM90_UNIFORM_DESC 1") != std::string::npos, udesc == 1) << what;
        EXPECT_EQ(req.source.find("#define FLEXATTN_SM90_SOFTMAX_ILP 1") != std::string::npos, udesc == 1) << what;
        EXPECT_EQ(req.source.find("#define FLEXATTN_SM90_LAZY_RESCALE 1") != std::string::npos, udesc == 1) << what;
        req.arch = "sm_90a";
        req.kernel_names = {"flexattn_fwd"};
        const jit::CompiledKernel compiled = jit::get_or_compile(req);
        expect_clean(compiled, what + (udesc ? " udesc" : ""));
        const std::optional<std::string> sass = testing_sass::disassemble(*compiled.cubin, &why);
        if (!sass) continue;
        expect_hopper_sass(*sass, what);
        r2ur[udesc] = testing_sass::count(*sass, "R2UR");
      }
      if (r2ur[0] > 0) {  // rotated loop, ptxas 13.0: 18-52 fewer (the peeled loop's second copy: 64-96 fewer)
        EXPECT_LT(r2ur[1] + 16, r2ur[0]) << what;
      }
    }
}
