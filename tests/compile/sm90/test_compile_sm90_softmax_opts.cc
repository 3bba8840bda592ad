// The sm90 forward's softmax opt-ins (fwd_softmax_sm90.cuh):
// FLEXATTN_SM90_POLY_EXP2 = k (common/poly_exp2.cuh): with k eighths of the softmax exp2s on the FMA pipe the
// kernel compiles clean (no spill, no stack, no ptxas warning) for dense, causal, softcap and ALiBi at D 64 and
// 128, and -- when a disassembler is present -- really moves k / 8 of the MUFU.EX2 off the MUFU. Out-of-range
// values are refused with the variable's name.
// FLEXATTN_SM90_SOFTCAP (on unless 0): softcap variants take the folded path (the source says so; unset = on)
// and compile clean at D 64 and 128, bf16 and f16, with and without a mask; other variants' code does not change.
// FLEXATTN_SM90_KV_RANGE=1: kv-range masks test partial tiles against the row bounds.
// tanh_approx softcap (kSoftcapApprox): one MUFU.TANH per entry in place of an ex2 and a reciprocal.
#include <gtest/gtest.h>

#include <cstdlib>
#include <utility>

#include "compile/compile_fixture.h"
#include "corpus.h"
#include "flexattn/codegen.h"
#include "flexattn/error.h"
#include "flexattn/jit.h"
#include "flexattn/mods.h"
#include "runtime/kernel_set.h"
#include "runtime/tma_sm90.h"
#include "sass_tools.h"
#include "sm90_fwd_build.h"

using namespace flexattn;

namespace {

using Sm90SoftmaxOptsCompile = compile_test::CompileTest;

// The forward source with environment variable `var` set to `value` (unset when null) for this call only.
std::string source_with(const Variant& v, int d, const char* value, const char* var = "FLEXATTN_SM90_POLY_EXP2",
                        DType t = DType::BF16) {
  runtime::KernelSetKey key{t, d, d, "sm_90a", false, runtime::KernelFamily::sm90};
  if (value) setenv(var, value, 1);
  std::string src;
  try {
    src = runtime::kernel_source_sm90(codegen::emit_cuda_variant(v, false), key);
  } catch (...) {
    unsetenv(var);
    throw;
  }
  unsetenv(var);
  return src;
}

void expect_no_spill(const jit::CompiledKernel& compiled, const std::string& what) {
  ASSERT_EQ(compiled.ptxas.count("flexattn_fwd"), 1u) << what << "\n" << compiled.log;
  const jit::PtxasInfo& info = compiled.ptxas.at("flexattn_fwd");
  EXPECT_EQ(info.spill_stores + info.spill_loads, 0) << what;
  EXPECT_EQ(info.stack, 0) << what;
  EXPECT_EQ(compiled.log.find("warning"), std::string::npos) << what << ":\n" << compiled.log;
}

}  // namespace

TEST_F(Sm90SoftmaxOptsCompile, PolyExp2CompilesCleanlyAndLeavesTheMufu) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
  std::string why;
  for (const char* name : {"full", "causal", "softcap:30+causal", "alibi+causal"})
    for (int d : {64, 128}) {
      const Variant v = corpus::build_variant(corpus::corpus_entry(name), shape).variant;
      const std::string what = std::string(name) + " D=" + std::to_string(d);
      int ex2[2] = {0, 0}, ffma[2] = {0, 0};
      for (int k : {0, 2}) {
        const std::string src = source_with(v, d, k ? "2" : nullptr);
        EXPECT_EQ(src.find("#define FLEXATTN_SM90_POLY_EXP2 2") != std::string::npos, k == 2) << what;
        const jit::CompiledKernel compiled =
            sm90_test::compile_fwd_source("attn_fwd_sm90a_poly" + std::to_string(k) + "_d" + std::to_string(d), src);
        expect_no_spill(compiled, what + " poly " + std::to_string(k));
        const std::optional<std::string> sass = testing_sass::disassemble(*compiled.cubin, &why);
        if (!sass) continue;
        EXPECT_EQ(testing_sass::count(*sass, "LDL"), 0) << what;
        ex2[k / 2] = testing_sass::count(*sass, "MUFU.EX2");
        ffma[k / 2] = testing_sass::count(*sass, "FFMA ");
      }
      if (ex2[0] == 0) continue;  // no disassembler
      // Two eighths of the row exp2s leave (16 per softmax copy of a 64 x 128 tile, at least two copies:
      // the kv loop's branches for the interior and the tail tile; the alpha and tanh exp2s stay), five FFMA each in
      // their place.
      EXPECT_GE(ex2[0] - ex2[1], 32) << what << ": " << ex2[0] << " -> " << ex2[1];
      EXPECT_GE(ffma[1] - ffma[0], 5 * (ex2[0] - ex2[1])) << what;
    }
}

TEST_F(Sm90SoftmaxOptsCompile, OutOfRangeValuesAreRefusedByName) {
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

TEST_F(Sm90SoftmaxOptsCompile, SoftcapPathCompilesCleanly) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
  Variant unmasked;
  unmasked.score_mod = mods::softcap(30);
  const Variant variants[2] = {corpus::build_variant(corpus::corpus_entry("softcap:30+causal"), shape).variant, unmasked};
  for (int i : {0, 1})
    for (int d : {64, 128})
      for (DType t : {DType::BF16, DType::F16}) {
        const Variant& v = variants[i];
        const std::string what = std::string(i ? "softcap:30" : "softcap:30+causal") + " D=" + std::to_string(d) + " " +
                                 std::string(dtype_name(t));
        const std::string src = source_with(v, d, "1", "FLEXATTN_SM90_SOFTCAP", t);
        EXPECT_NE(src.find("#define FLEXATTN_SM90_SOFTCAP_PATH 1"), std::string::npos) << what;
        EXPECT_EQ(source_with(v, d, nullptr, "FLEXATTN_SM90_SOFTCAP", t), src) << what << ": unset is on";
        EXPECT_NE(src.find("static constexpr bool kSoftcap = true;"), std::string::npos) << what;
        expect_no_spill(sm90_test::compile_fwd_source("attn_fwd_sm90a_softcap_d" + std::to_string(d), src), what);
      }
  // Another variant: the switch adds the define, the variant has no kSoftcap block, the kernel is unchanged.
  const Variant causal = corpus::build_variant(corpus::corpus_entry("alibi+causal"), shape).variant;
  const std::string on = source_with(causal, 128, "1", "FLEXATTN_SM90_SOFTCAP"),
                    off = source_with(causal, 128, "0", "FLEXATTN_SM90_SOFTCAP");
  EXPECT_EQ(on.find("kSoftcap"), std::string::npos);
  // Same program name: the cubin then differs only if the code does.
  const jit::CompiledKernel a = sm90_test::compile_fwd_source("attn_fwd_sm90a_softcap_switch", on),
                            b = sm90_test::compile_fwd_source("attn_fwd_sm90a_softcap_switch", off);
  const std::optional<std::string> ta = testing_sass::elf_section(*a.cubin, ".text.flexattn_fwd"),
                                   tb = testing_sass::elf_section(*b.cubin, ".text.flexattn_fwd");
  ASSERT_TRUE(ta && tb && !ta->empty());
  EXPECT_TRUE(*ta == *tb) << "the softcap switch changed a non-softcap kernel's code";
  // And the comparison can see a difference: the softcap variant's code does change.
  const jit::CompiledKernel c = sm90_test::compile_fwd_source("attn_fwd_sm90a_softcap_switch", source_with(variants[0], 128, "1", "FLEXATTN_SM90_SOFTCAP")),
                            d = sm90_test::compile_fwd_source("attn_fwd_sm90a_softcap_switch", source_with(variants[0], 128, "0", "FLEXATTN_SM90_SOFTCAP"));
  EXPECT_FALSE(*testing_sass::elf_section(*c.cubin, ".text.flexattn_fwd") ==
               *testing_sass::elf_section(*d.cubin, ".text.flexattn_fwd"));
}

// tanh_approx softcap (codegen's kSoftcapApprox): the folded path with one tanh.approx per entry. Clean at D 64 and
// 128 with and without a mask; in the SASS each MUFU.TANH replaces one MUFU.EX2 and one MUFU.RCP of the exact
// softcap's (nvdisasm 13.0, softcap + causal D=128: EX2 652 -> 396, RCP 289 -> 33, TANH 256), and
// FLEXATTN_SM90_SOFTCAP_RCP, which moves the exact path's reciprocals, leaves this source as it is.
TEST_F(Sm90SoftmaxOptsCompile, ApproxSoftcapTakesOneMufuPerTanh) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
  std::string why;
  Variant exact_unmasked, approx_unmasked;
  exact_unmasked.score_mod = mods::softcap(30);
  approx_unmasked.score_mod = mods::softcap(30, true);
  const Variant exact[2] = {corpus::build_variant(corpus::corpus_entry("softcap:30+causal"), shape).variant,
                            exact_unmasked};
  const Variant approx[2] = {corpus::build_variant(corpus::corpus_entry("softcap_approx:30+causal"), shape).variant,
                             approx_unmasked};
  for (int i : {0, 1})
    for (int d : {64, 128}) {
      const std::string what = std::string(i ? "softcap_approx:30" : "softcap_approx:30+causal") + " D=" + std::to_string(d);
      const std::string src = source_with(approx[i], d, nullptr);
      EXPECT_NE(src.find("static constexpr bool kSoftcapApprox = true;"), std::string::npos) << what;
      const std::string name = "attn_fwd_sm90a_softcap_approx_d" + std::to_string(d);
      const jit::CompiledKernel a = sm90_test::compile_fwd_source(name, src);
      // The exact softcap with every reciprocal on the MUFU (D = 64's default moves them to the FMA pipe).
      const jit::CompiledKernel e =
          sm90_test::compile_fwd_source(name, source_with(exact[i], d, "0", "FLEXATTN_SM90_SOFTCAP_RCP"));
      expect_no_spill(a, what);
      const std::optional<std::string> sa = testing_sass::disassemble(*a.cubin, &why),
                                       se = testing_sass::disassemble(*e.cubin, &why);
      if (sa && se) {
        const int tanh = testing_sass::count(*sa, "MUFU.TANH");
        EXPECT_GE(tanh, 64) << what;  // 64 per softmax copy (the rotated loop has one: ptxas 13.0)
        EXPECT_EQ(tanh % 64, 0) << what;
        EXPECT_EQ(testing_sass::count(*se, "MUFU.TANH"), 0) << what;
        EXPECT_EQ(testing_sass::count(*se, "MUFU.EX2") - testing_sass::count(*sa, "MUFU.EX2"), tanh) << what;
        EXPECT_EQ(testing_sass::count(*se, "MUFU.RCP") - testing_sass::count(*sa, "MUFU.RCP"), tanh) << what;
      }
      EXPECT_EQ(source_with(approx[i], d, "8", "FLEXATTN_SM90_SOFTCAP_RCP"), src) << what;
    }
}

// FLEXATTN_SM90_KV_RANGE=1 (default off): kv-range masks (codegen's kKvRange) compile clean with the row-bounds
// path, every entry of a partial tile costs two ISETP with immediate columns and an FSEL (the sliding window's
// mask_mod took IMAD.IADD + 2 ISETP + FSEL, plus a VIADD per column: the path must remove the per-entry index
// arithmetic), and a variant without kKvRange gets no define.
TEST_F(Sm90SoftmaxOptsCompile, KvRangePathCompilesCleanlyAndDropsIndexArithmetic) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
  std::string why;
  for (const char* name : {"causal", "sliding_window:100", "prefix_lm:70", "softcap:30+causal", "alibi+causal"})
    for (int d : {64, 128}) {
      const Variant v = corpus::build_variant(corpus::corpus_entry(name), shape).variant;
      const std::string what = std::string(name) + " D=" + std::to_string(d);
      const std::string on = source_with(v, d, "1", "FLEXATTN_SM90_KV_RANGE"), off = source_with(v, d, nullptr, "FLEXATTN_SM90_KV_RANGE");
      EXPECT_NE(on.find("#define FLEXATTN_SM90_KV_RANGE_PATH 1"), std::string::npos) << what;
      EXPECT_EQ(off.find("KV_RANGE_PATH"), std::string::npos) << what << ": unset is off";
      const jit::CompiledKernel a = sm90_test::compile_fwd_source("attn_fwd_sm90a_kv_range_d" + std::to_string(d), on);
      expect_no_spill(a, what + " kv range");
      if (std::string(name) != "sliding_window:100" || d != 128) continue;
      const jit::CompiledKernel b = sm90_test::compile_fwd_source("attn_fwd_sm90a_kv_range_d" + std::to_string(d), off);
      const std::optional<std::string> sa = testing_sass::disassemble(*a.cubin, &why), sb = testing_sass::disassemble(*b.cubin, &why);
      if (!sa || !sb) continue;  // no disassembler
      // The partial tiles' masked copy of 64 entries: at least 64 fewer integer adds.
      const int adds_on = testing_sass::count(*sa, "IMAD.IADD") + testing_sass::count(*sa, "VIADD"),
                adds_off = testing_sass::count(*sb, "IMAD.IADD") + testing_sass::count(*sb, "VIADD");
      EXPECT_GE(adds_off - adds_on, 64) << what << ": " << adds_off << " -> " << adds_on;
    }
  const Variant doc = corpus::build_variant(corpus::corpus_entry("document:3"), shape).variant;
  EXPECT_EQ(source_with(doc, 128, "1", "FLEXATTN_SM90_KV_RANGE").find("KV_RANGE_PATH"), std::string::npos);
}

// FLEXATTN_SM90_SOFTCAP_RCP = k (unset: 8 at D = 64, 0 otherwise): softcap sources only get the define; unset, a
// D = 64 source is k = 8's and a D = 128 source k = 0's; with k = 6 and 8 the kernel
// compiles clean at D 64 and 128 with and without a mask, and -- with a disassembler -- k eighths of the tanh
// reciprocals leave the MUFU (MUFU.RCP) for FFMA. Out-of-range values are refused with the variable's name.
TEST_F(Sm90SoftmaxOptsCompile, SoftcapRcpCompilesCleanlyAndLeavesTheMufu) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
  std::string why;
  Variant unmasked;
  unmasked.score_mod = mods::softcap(30);
  const Variant variants[2] = {corpus::build_variant(corpus::corpus_entry("softcap:30+causal"), shape).variant, unmasked};
  const char* var = "FLEXATTN_SM90_SOFTCAP_RCP";
  for (int i : {0, 1})
    for (int d : {64, 128}) {
      const std::string what = std::string(i ? "softcap:30" : "softcap:30+causal") + " D=" + std::to_string(d);
      int rcp[3] = {0, 0, 0}, ffma[3] = {0, 0, 0}, nan_min[3] = {0, 0, 0};
      const int ks[3] = {0, 6, 8};
      for (int j : {0, 1, 2}) {
        const std::string value = std::to_string(ks[j]);
        const std::string src = source_with(variants[i], d, value.c_str(), var);
        EXPECT_EQ(src.find("#define FLEXATTN_SM90_SOFTCAP_RCP " + value) != std::string::npos, ks[j] > 0) << what;
        if (ks[j] == (d == 64 ? 8 : 0)) {
          EXPECT_EQ(source_with(variants[i], d, nullptr, var), src) << what << ": unset";
        }
        const jit::CompiledKernel compiled = sm90_test::compile_fwd_source(
            "attn_fwd_sm90a_softcap_rcp" + value + "_d" + std::to_string(d), src);
        expect_no_spill(compiled, what + " rcp " + value);
        const std::optional<std::string> sass = testing_sass::disassemble(*compiled.cubin, &why);
        if (!sass) continue;
        rcp[j] = testing_sass::count(*sass, "MUFU.RCP");
        ffma[j] = testing_sass::count(*sass, "FFMA ");
        nan_min[j] = testing_sass::count(*sass, "FMNMX.NAN");
      }
      if (rcp[0] == 0) continue;  // no disassembler
      // Each softmax copy of a 64 x 128 tile has 64 tanh reciprocals per thread (at least one copy: the rotated
      // loop's; the peeled loop of sessions <= 28 had two); k = 8 moves all of them (nvdisasm 13.0, softcap + causal D=64, rotated:
      // MUFU.RCP 95 -> 31, the rest the epilogue's 1 / l and the setup's divisions), k = 6 six eighths.
      const int moved = rcp[0] - rcp[2];
      EXPECT_GE(moved, 64) << what << ": " << rcp[0] << " -> " << rcp[2];
      EXPECT_EQ(moved % 64, 0) << what << ": " << rcp[0] << " -> " << rcp[2];
      EXPECT_EQ(rcp[0] - rcp[1], moved * 6 / 8) << what << ": k = 6 moves six eighths";
      EXPECT_GE(ffma[2] - ffma[0], 5 * (rcp[0] - rcp[2])) << what;
      // poly_tanh_rcp's clamp keeps a NaN score NaN: min.NaN.f32, one per moved reciprocal (fminf would drop it).
      EXPECT_GE(nan_min[2] - nan_min[0], moved) << what << ": " << nan_min[0] << " -> " << nan_min[2];
    }
  // Not a softcap variant: no define, whatever the value.
  const Variant causal = corpus::build_variant(corpus::corpus_entry("causal"), shape).variant;
  EXPECT_EQ(source_with(causal, 128, "8", var).find("SOFTCAP_RCP"), std::string::npos);
  for (const char* bad : {"9", "-1", "six"}) {
    try {
      source_with(variants[0], 128, bad, var);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("FLEXATTN_SM90_SOFTCAP_RCP: expected a number in [0"), std::string::npos)
          << e.what();
    }
  }
}

// FLEXATTN_SM90_REL_DIAG (default on, but for the gather shape): distance-only biases (codegen's kRelDiag: T5's
// buckets, with and without a mask) get the define -- other variants do not -- and compile clean at D 64 and 128, and -- with a disassembler
// -- evaluate the bias per distance, not per entry: the per-entry reads of T5's bias leave, the table's reads come,
// and the kernel shrinks to less than half (4.7x at D = 64; ptxas 13.0 compiles it in ~1.5 s instead of ~12).
TEST_F(Sm90SoftmaxOptsCompile, RelDiagTablesCompileCleanlyAndEvaluateOncePerDistance) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
  const Variant t5 = corpus::build_variant(corpus::corpus_entry("t5"), shape).variant;
  Variant t5_causal = t5;
  t5_causal.mask_mod = mods::causal();
  std::string why;
  for (const auto& [v, name] : {std::pair{&t5, "t5"}, std::pair{static_cast<const Variant*>(&t5_causal), "t5+causal"}})
    for (int d : {64, 128}) {
      const std::string what = std::string(name) + " D=" + std::to_string(d);
      const std::string on = source_with(*v, d, "1", "FLEXATTN_SM90_REL_DIAG");
      EXPECT_NE(on.find("#define FLEXATTN_SM90_REL_DIAG 1"), std::string::npos) << what;
      EXPECT_EQ(source_with(*v, d, nullptr, "FLEXATTN_SM90_REL_DIAG"), on) << what << ": unset is on";
      EXPECT_EQ(source_with(*v, d, "0", "FLEXATTN_SM90_REL_DIAG").find("REL_DIAG"), std::string::npos)
          << what << ": 0 is off";
      const jit::CompiledKernel a = sm90_test::compile_fwd_source("attn_fwd_sm90a_rel_diag_d" + std::to_string(d), on);
      expect_no_spill(a, what + " rel diag");
      if (std::string(name) != "t5" || d != 64) continue;
      const jit::CompiledKernel b = sm90_test::compile_fwd_source(
          "attn_fwd_sm90a_rel_diag_d" + std::to_string(d), source_with(*v, d, "0", "FLEXATTN_SM90_REL_DIAG"));
      const std::optional<std::string> sa = testing_sass::disassemble(*a.cubin, &why), sb = testing_sass::disassemble(*b.cubin, &why);
      if (!sa || !sb) continue;  // no disassembler
      // The per-entry path reads t5_bias once per entry (64 loads per softmax copy, two copies in the rotated loop:
      // nvdisasm 13.0 counted 254 LDG against 128 left for the mask lists and the producer).
      const int ldg_on = testing_sass::count(*sa, "LDG"), ldg_off = testing_sass::count(*sb, "LDG");
      EXPECT_GE(ldg_off - ldg_on, 96) << what << ": LDG " << ldg_off << " -> " << ldg_on;
      EXPECT_GE(testing_sass::count(*sa, "LDS"), 2 * 34) << what << ": 34 table reads per softmax copy";
      EXPECT_LT(2 * sa->size(), sb->size()) << what << ": SASS text " << sb->size() << " -> " << sa->size();
    }
  const Variant alibi = corpus::build_variant(corpus::corpus_entry("alibi+causal"), shape).variant;
  EXPECT_EQ(source_with(alibi, 128, "1", "FLEXATTN_SM90_REL_DIAG").find("REL_DIAG"), std::string::npos);
  // Asked for (1), the gather shape takes the tables instead of its row gathers (and drops its clamped third branch):
  // clean too. Unset, it keeps its gathers.
  for (const char* name : {"relbias+causal", "relbias(learnable)"}) {
    const Variant rel = corpus::build_variant(corpus::corpus_entry(name), shape).variant;
    const std::string on = source_with(rel, 128, "1", "FLEXATTN_SM90_REL_DIAG");
    EXPECT_NE(on.find("#define FLEXATTN_SM90_REL_DIAG 1"), std::string::npos) << name;
    EXPECT_EQ(on.find("FLEXATTN_SM90_REL_GATHER"), std::string::npos) << name;
    EXPECT_NE(source_with(rel, 128, nullptr, "FLEXATTN_SM90_REL_DIAG").find("#define FLEXATTN_SM90_REL_GATHER 1"),
              std::string::npos)
        << name;
    expect_no_spill(sm90_test::compile_fwd_source("attn_fwd_sm90a_rel_diag_gather", on), std::string(name) + " rel diag");
  }
}

// FLEXATTN_SM90_GATHER_PREFETCH (default on): only rel-gather sources get the define -- and with a mask_mod only at
// D = 64: relbias + causal spilled 40 bytes with it at D = 128 (sm90_fwd_form) -- which compile clean, and -- with a
// disassembler -- the loop's wait for S (`WARPGROUP.DEPBAR.LE gsb0, 0x1`, P V still in flight) comes after the
// tile's 34 row loads instead of before them.
TEST_F(Sm90SoftmaxOptsCompile, GatherPrefetchLoadsTheRowBeforeTheWaitForS) {
  mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
  const Variant alibi = corpus::build_variant(corpus::corpus_entry("alibi+causal"), shape).variant;
  EXPECT_EQ(source_with(alibi, 128, "1", "FLEXATTN_SM90_GATHER_PREFETCH").find("REL_PREFETCH"), std::string::npos);
  const Variant rel = corpus::build_variant(corpus::corpus_entry("relbias(learnable)"), shape).variant;
  EXPECT_EQ(source_with(rel, 256, "1", "FLEXATTN_SM90_GATHER_PREFETCH").find("REL_PREFETCH"), std::string::npos)
      << "D = 256: not tried";
  // LDGs among the 48 instructions (96 lines of cuobjdump text) before the first loop wait for S.
  const auto loads_before_wait = [](const std::string& sass) {
    const size_t wait = sass.find("WARPGROUP.DEPBAR.LE gsb0, 0x1");
    if (wait == std::string::npos) return -1;
    size_t from = wait;
    for (int n = 0; n < 96 && from > 0; ++n) from = sass.rfind('\n', from - 1);
    return testing_sass::count(sass.substr(from, wait - from), "LDG");
  };
  std::string why;
  for (const char* name : {"relbias(learnable)", "relbias+causal"})
    for (int d : {64, 128}) {
      const std::string what = std::string(name) + " D=" + std::to_string(d);
      const Variant v = corpus::build_variant(corpus::corpus_entry(name), shape).variant;
      const std::string on = source_with(v, d, "1", "FLEXATTN_SM90_GATHER_PREFETCH");
      const std::string off = source_with(v, d, "0", "FLEXATTN_SM90_GATHER_PREFETCH");
      EXPECT_EQ(source_with(v, d, nullptr, "FLEXATTN_SM90_GATHER_PREFETCH"), on) << what << ": unset is on";
      const bool masked = std::string(name) != "relbias(learnable)";
      EXPECT_EQ(on.find("#define FLEXATTN_SM90_REL_PREFETCH 1") != std::string::npos, !(masked && d > 64)) << what;
      EXPECT_NE(on.find("#define FLEXATTN_SM90_REL_GATHER 1"), std::string::npos) << what;
      EXPECT_EQ(off.find("REL_PREFETCH"), std::string::npos) << what << ": 0 is off";
      const jit::CompiledKernel a = sm90_test::compile_fwd_source("attn_fwd_sm90a_rel_prefetch", on);
      expect_no_spill(a, what + " prefetch");
      if (d != 128 || masked) continue;
      const jit::CompiledKernel b = sm90_test::compile_fwd_source("attn_fwd_sm90a_rel_prefetch_off", off);
      const std::optional<std::string> sa = testing_sass::disassemble(*a.cubin, &why), sb = testing_sass::disassemble(*b.cubin, &why);
      if (!sa || !sb) continue;  // no disassembler
      EXPECT_GE(loads_before_wait(*sa), 34) << what;
      EXPECT_LT(loads_before_wait(*sb), 34) << what;
    }
}
