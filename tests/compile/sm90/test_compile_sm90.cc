// The sm90 forward compiles with NVRTC for sm_90a, for every corpus variant and the head dims / dtypes
// it supports: no spills, no stack, no ptxas warning (in particular none of the wgmma serialization
// warnings C7510-C7515 and no ignored setmaxnreg, C7508), and -- when cuobjdump is available -- SASS
// with HGMMA, TMA loads and stores, both setmaxnreg and no local memory.
#include <gtest/gtest.h>

#include <cstdlib>

#include "corpus.h"
#include "flexattn/error.h"
#include "flexattn/jit.h"
#include "runtime/kernel_set.h"
#include "sass_tools.h"
#include "sm90/tile_config_sm90.h"

using namespace flexattn;

namespace {

class Sm90Compile : public ::testing::Test {
 protected:
  void SetUp() override {
    static const bool nvrtc = jit::jit_info().nvrtc_found;
    if (!nvrtc) GTEST_SKIP() << "NVRTC not found: " << jit::jit_info().nvrtc_error;
    static const std::string dir = [] {
      char tmpl[] = "/tmp/flexattn-sm90-test-XXXXXX";
      const char* d = mkdtemp(tmpl);
      return std::string(d ? d : "/tmp");
    }();
    setenv("FLEXATTN_CACHE_DIR", dir.c_str(), 1);
  }
};

const runtime::KernelSet& compile_sm90(const Variant& v, DType t, int d, int dv) {
  runtime::KernelSetKey key{t, d, dv, "sm_90a", false, runtime::KernelFamily::sm90};
  return runtime::get_kernel_set(v, key);
}

// Everything the compile tier can say about one kernel without running it.
void expect_clean(const runtime::KernelSet& set, const std::string& what) {
  ASSERT_EQ(set.compiled.ptxas.count("flexattn_fwd"), 1u) << what << "\n" << set.compiled.log;
  const jit::PtxasInfo& info = set.compiled.ptxas.at("flexattn_fwd");
  EXPECT_EQ(info.spill_stores + info.spill_loads, 0) << what << " spills";
  EXPECT_EQ(info.stack, 0) << what << " has a stack frame";
  // __launch_bounds__(384, 1): the entry allocation is capped at 65536 / 384 rounded down to 8.
  EXPECT_LE(info.registers, 168) << what;
  EXPECT_EQ(set.compiled.log.find("warning"), std::string::npos) << what << " ptxas warned:\n" << set.compiled.log;
  EXPECT_EQ(set.compiled.log.find("serialized"), std::string::npos) << what << ":\n" << set.compiled.log;
}

}  // namespace

TEST_F(Sm90Compile, EveryCorpusVariantCompilesCleanly) {
  for (const corpus::CorpusEntry& c : corpus::mod_corpus()) {
    mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
    corpus::BuiltVariant b = corpus::build_variant(c, shape);
    expect_clean(compile_sm90(b.variant, DType::BF16, 128, 128), c.name);
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
    const std::string what = "D=" + std::to_string(d);
    EXPECT_GT(testing_sass::count(*sass, "HGMMA.64x"), 0) << what << ": no wgmma in the SASS";
    EXPECT_GT(testing_sass::count(*sass, ".tnspB"), 0) << what << ": P V must read V MN-major";
    EXPECT_GT(testing_sass::count(*sass, "UTMALDG"), 0) << what << ": no TMA load";
    EXPECT_GT(testing_sass::count(*sass, "UTMASTG"), 0) << what << ": no TMA store";
    EXPECT_EQ(testing_sass::count(*sass, "USETMAXREG"), 2) << what << ": setmaxnreg dec + inc";
    // The overlap of softmax and P V: a wait that leaves one wgmma group in flight.
    EXPECT_GT(testing_sass::count(*sass, "WARPGROUP.DEPBAR.LE gsb0, 0x1"), 0) << what;
    EXPECT_EQ(testing_sass::count(*sass, "LDL"), 0) << what << ": local loads";
    EXPECT_EQ(testing_sass::count(*sass, "STL"), 0) << what << ": local stores";
    // setmaxnreg 240 for the consumers: no code may name a register past R239.
    EXPECT_LT(testing_sass::max_register(*sass), kern::kSm90ConsumerRegs) << what;
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
