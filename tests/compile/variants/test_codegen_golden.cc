// Golden files of generated kernel sources: a change to codegen or to the source assembly shows up
// as a diff here. Regenerate with FLEXATTN_UPDATE_GOLDEN=1 after checking the diff is intended.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "corpus.h"
#include "flexattn/codegen.h"
#include "runtime/kernel_set.h"

using namespace flexattn;

namespace {

void check_golden(const std::string& name, const std::string& text) {
  const std::string path = std::string(FLEXATTN_GOLDEN_DIR) + "/" + name;
  if (std::getenv("FLEXATTN_UPDATE_GOLDEN")) {
    std::ofstream(path) << text;
    return;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "missing golden file " << path << " (run with FLEXATTN_UPDATE_GOLDEN=1)";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(text, want.str()) << "generated source changed: " << path;
}

}  // namespace

TEST(CodegenGolden, CorpusSources) {
  for (const char* name : {"causal", "softcap:30+causal", "softcap_approx:30+causal", "relbias(learnable)", "document:3", "t5",
                           "text:mixed"}) {
    const corpus::CorpusEntry& c = corpus::corpus_entry(name);
    corpus::BuiltVariant b = corpus::build_variant(c, mods::ProblemShape{});
    const codegen::GeneratedVariant gen = codegen::emit_cuda_variant(b.variant, true);
    runtime::KernelSetKey key{DType::BF16, 128, 128, "sm_90a", true};
    std::string file = name;
    for (char& ch : file)
      if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
    check_golden(file + ".cu", runtime::kernel_source(gen, key));
  }
}

TEST(CodegenGolden, LiteralValuesDoNotChangeTheSource) {
  Variant a, b;
  a.score_mod = mods::softcap(20);
  b.score_mod = mods::softcap(30);
  EXPECT_EQ(codegen::emit_cuda_variant(a, true).source, codegen::emit_cuda_variant(b, true).source);
  const std::vector<double> la = codegen::emit_cuda_variant(a, true).layout.literal_values();
  const std::vector<double> lb = codegen::emit_cuda_variant(b, true).layout.literal_values();
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_NE(la, lb);  // the values travel in ModParams instead
  EXPECT_EQ(la[0], 20.0);
}

TEST(CodegenGolden, IntegerLiteralDivisorsAreCompiledIn) {
  // q_idx // 256 == kv_idx // 256: a runtime divisor costs a division sequence per entry; a constant
  // one a shift. The value therefore is part of the source (one compile per divisor value).
  Variant a, b;
  a.mask_mod = ir::floordiv(ir::q_idx(), 256) == ir::floordiv(ir::kv_idx(), 256);
  b.mask_mod = ir::floordiv(ir::q_idx(), 512) == ir::mod(ir::kv_idx(), 512);
  const std::string sa = codegen::emit_cuda_variant(a, false).source;
  const std::string sb = codegen::emit_cuda_variant(b, false).source;
  EXPECT_NE(sa.find("fa_floordiv(q_idx, ((int)256))"), std::string::npos) << sa;
  EXPECT_NE(sb.find("fa_mod(kv_idx, ((int)512))"), std::string::npos) << sb;
  EXPECT_EQ(sa.find("p.lit["), std::string::npos) << sa;
  // A divisor that is not a literal (here an expression of kv_idx) stays a runtime value.
  Variant c;
  c.mask_mod = ir::floordiv(ir::q_idx(), ir::kv_idx() + 1) == 0;
  const std::string sc = codegen::emit_cuda_variant(c, false).source;
  EXPECT_EQ(sc.find("((int)1))"), std::string::npos) << sc;
}
