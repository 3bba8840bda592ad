// The "NAME[:ARGS]" registry: what each entry builds, the buffers/scalars it asks for, and its errors.
#include <gtest/gtest.h>

#include <cmath>

#include "flexattn/error.h"
#include "flexattn/ir_passes.h"
#include "flexattn/ir_text.h"
#include "flexattn/mods.h"
#include "mods_test_util.h"

using namespace flexattn;
using flexattn::test::error_of;

namespace {

mods::ProblemShape shape(int64_t H, int64_t Q, int64_t KV) {
  mods::ProblemShape p;
  p.H = H, p.Hkv = H, p.Q = Q, p.KV = KV, p.seed = 3;
  return p;
}

// A spelling with arguments for every registry entry.
std::string example(const mods::RegistryEntry& e) {
  if (e.name == "sliding_window") return "sliding_window:16";
  if (e.name == "prefix_lm") return "prefix_lm:8";
  if (e.name == "document") return "document:3";
  if (e.name == "chunked") return "chunked:8";
  if (e.name == "dilated") return "dilated:2";
  if (e.name == "softcap") return "softcap:20";
  if (e.name == "softcap_approx") return "softcap_approx:20";
  return e.name;
}

}  // namespace

TEST(Registry, LookupBuildsTheLibraryExpression) {
  EXPECT_EQ(mods::lookup("causal").expr.get(), mods::causal().get());
  EXPECT_EQ(mods::lookup("sliding_window:256").expr.get(), mods::sliding_window(256).get());
  EXPECT_EQ(mods::lookup("prefix_lm:0").expr.get(), mods::prefix_lm(0).get());
  EXPECT_EQ(mods::lookup("chunked:64").expr.get(), mods::chunked(64).get());
  EXPECT_EQ(mods::lookup("dilated:4").expr.get(), mods::dilated(4).get());
  EXPECT_EQ(mods::lookup("softcap:30").expr.get(), mods::softcap(30).get());
  EXPECT_EQ(mods::lookup("softcap:2.5").expr.get(), mods::softcap(2.5).get());
  EXPECT_EQ(mods::lookup("softcap_approx:30").expr.get(), mods::softcap(30, true).get());
  EXPECT_NE(mods::softcap(30, true).get(), mods::softcap(30).get());
  EXPECT_EQ(ir::print(mods::softcap(30, true)), "30.0 * tanh_approx(score / 30.0)");
  EXPECT_EQ(mods::lookup("alibi").expr.get(), mods::alibi("H").get());
  EXPECT_EQ(mods::lookup("t5").expr.get(), mods::t5_bias(ir::Buffer{"t5_bias", DType::F32}, 32, 128, true).get());
  EXPECT_EQ(mods::lookup("t5:16:64").expr.get(), mods::t5_bias(ir::Buffer{"t5_bias", DType::F32}, 16, 64, true).get());
  EXPECT_TRUE(mods::lookup("causal").is_mask);
  EXPECT_FALSE(mods::lookup("softcap:30").is_mask);
  EXPECT_EQ(mods::lookup("sliding_window:256").name, "sliding_window:256");
}

TEST(Registry, EveryEntryBuildsAndVerifies) {
  ASSERT_GE(mods::registry().size(), 12u);
  for (const mods::RegistryEntry& e : mods::registry()) {
    const mods::ModSpec m = mods::lookup(example(e));
    EXPECT_EQ(m.is_mask, e.is_mask) << e.name;
    if (m.is_mask) EXPECT_NO_THROW(ir::verify_mask_mod(m.expr)) << e.name;
    else EXPECT_NO_THROW(ir::verify_score_mod(m.expr)) << e.name;
    // Every buffer the expression reads is described, with the dtype and rank it is read with.
    for (const ir::BufferUse& u : ir::buffers(m.expr)) {
      const mods::BufferSpec* spec = nullptr;
      for (const mods::BufferSpec& b : m.buffers)
        if (b.name == u.name) spec = &b;
      ASSERT_NE(spec, nullptr) << e.name << " reads " << u.name;
      const HostTensor t = spec->make(shape(4, 40, 24));
      EXPECT_EQ(int(t.shape.size()), u.rank) << e.name;
      EXPECT_EQ(t.dtype, spec->dtype);
    }
    for (const std::string& s : ir::scalar_names(m.expr)) {
      bool described = false;
      for (const mods::ScalarSpec& sc : m.scalars) described = described || sc.name == s;
      EXPECT_TRUE(described) << e.name << " reads scalar " << s;
    }
  }
}

TEST(Registry, DocumentCreatesEqualDocuments) {
  const mods::ModSpec m = mods::lookup("document:8");
  ASSERT_EQ(m.buffers.size(), 1u);
  EXPECT_EQ(m.buffers[0].name, "doc_ids");
  EXPECT_EQ(m.buffers[0].dtype, DType::I32);
  EXPECT_FALSE(m.buffers[0].trainable);
  const HostTensor ids = m.buffers[0].make(shape(2, 64, 48));
  ASSERT_EQ(ids.shape, std::vector<int64_t>{64});  // max(Q, KV)
  for (int64_t i = 0; i < 64; ++i) EXPECT_EQ(ids.get(i), double(i / 8)) << i;
  const mods::ModSpec m64 = mods::lookup("document:3:i64");
  EXPECT_EQ(m64.buffers[0].dtype, DType::I64);
  EXPECT_EQ(ir::buffers(m64.expr)[0].dtype, DType::I64);
}

TEST(Registry, AlibiAndRelbiasScalarsComeFromTheShape) {
  const mods::ModSpec a = mods::lookup("alibi");
  ASSERT_EQ(a.scalars.size(), 1u);
  EXPECT_EQ(a.scalars[0].name, "H");
  EXPECT_EQ(a.scalars[0].value(shape(16, 8, 8)), 16);
  const mods::ModSpec r = mods::lookup("relbias");
  ASSERT_EQ(r.scalars.size(), 1u);
  EXPECT_EQ(r.scalars[0].name, "S");
  EXPECT_EQ(r.scalars[0].value(shape(2, 10, 30)), 30);
  ASSERT_EQ(r.buffers.size(), 1u);
  EXPECT_TRUE(r.buffers[0].trainable);
  const HostTensor bias = r.buffers[0].make(shape(2, 10, 30));
  EXPECT_EQ(bias.shape, (std::vector<int64_t>{2, 39}));
  EXPECT_EQ(bias.bytes, r.buffers[0].make(shape(2, 10, 30)).bytes) << "deterministic for a seed";
  EXPECT_NE(bias.get(0), bias.get(1));
}

TEST(Registry, RelbiasConstIsTheSameModWithAFrozenBias) {
  // relbias:const: the timing baseline of the learnable bias's backward (the same kernels minus the
  // buffer gradient): same expression and buffer, not trainable.
  const mods::ModSpec r = mods::lookup("relbias"), c = mods::lookup("relbias:const");
  EXPECT_TRUE(c.expr.same(r.expr));
  ASSERT_EQ(c.buffers.size(), 1u);
  EXPECT_FALSE(c.buffers[0].trainable);
  EXPECT_EQ(c.buffers[0].make(shape(2, 10, 30)).bytes, r.buffers[0].make(shape(2, 10, 30)).bytes);
  EXPECT_NE(error_of([] { mods::lookup("relbias:learnable"); }).find("only option of relbias is 'const'"),
            std::string::npos);
}

TEST(Registry, AlibiSlopesBufferHoldsTheStandardSlopes) {
  const mods::ModSpec m = mods::lookup("alibi_slopes");
  const HostTensor s = m.buffers.at(0).make(shape(8, 4, 4));
  ASSERT_EQ(s.shape, std::vector<int64_t>{8});
  for (int h = 0; h < 8; ++h) EXPECT_FLOAT_EQ(float(s.get(h)), std::exp2(-float(h + 1)));
}

TEST(Registry, UnknownNameListsKnownNames) {
  const std::string msg = error_of([] { mods::lookup("slidingwindow:3"); });
  EXPECT_EQ(msg.rfind("unknown mod 'slidingwindow'; known mods: ", 0), 0u) << msg;
  for (const mods::RegistryEntry& e : mods::registry()) EXPECT_NE(msg.find(e.syntax), std::string::npos) << e.syntax;
  EXPECT_EQ(error_of([] { mods::lookup(""); }).rfind("empty mod name in ''", 0), 0u);
}

TEST(Registry, ArgumentErrorsNameTheModAndWhatIsExpected) {
  EXPECT_EQ(error_of([] { mods::lookup("sliding_window"); }),
            "mod 'sliding_window': expected sliding_window:W (1 argument), got 0");
  EXPECT_EQ(error_of([] { mods::lookup("causal:3"); }), "mod 'causal:3': expected causal (0 arguments), got 1");
  EXPECT_EQ(error_of([] { mods::lookup("sliding_window:abc"); }),
            "mod 'sliding_window:abc': W (window) must be an integer, got 'abc'");
  EXPECT_EQ(error_of([] { mods::lookup("sliding_window:12x"); }),
            "mod 'sliding_window:12x': W (window) must be an integer, got '12x'");
  EXPECT_EQ(error_of([] { mods::lookup("sliding_window:-1"); }),
            "mod 'sliding_window:-1': W (window) must be >= 0, got -1");
  EXPECT_EQ(error_of([] { mods::lookup("chunked:0"); }), "mod 'chunked:0': C (chunk size) must be >= 1, got 0");
  EXPECT_EQ(error_of([] { mods::lookup("softcap:0"); }), "mod 'softcap:0': C (cap) must be > 0, got 0");
  EXPECT_EQ(error_of([] { mods::lookup("softcap:nan"); }),
            "mod 'softcap:nan': C (cap) must be a finite number, got 'nan'");
  EXPECT_EQ(error_of([] { mods::lookup("softcap:"); }), "mod 'softcap:': C (cap) must be a finite number, got ''");
  // outside f32: inf or 0 in the kernels (a cap of 0: NaN at score 0), used as given by the double reference
  EXPECT_EQ(error_of([] { mods::lookup("softcap:1e-320"); }),
            "mod 'softcap:1e-320': C (cap) must lie in the normal float32 range [1.2e-38, 3.4e38], got 1e-320");
  EXPECT_EQ(error_of([] { mods::lookup("softcap_approx:1e39"); }),
            "mod 'softcap_approx:1e39': C (cap) must lie in the normal float32 range [1.2e-38, 3.4e38], got 1e39");
  EXPECT_EQ(error_of([] { mods::lookup("t5:32:1"); }),
            "mod 't5:32:1': t5_bucket: max_distance must be > 8 (num_buckets / 4), got 1");
  EXPECT_EQ(error_of([] { mods::lookup("document:4:f32"); }),
            "mod 'document:4:f32': the id type must be i32 or i64, got 'f32'");
  EXPECT_EQ(error_of([] { mods::lookup("t5:1:2:3"); }),
            "mod 't5:1:2:3': expected t5[:NUM_BUCKETS[:MAX_DISTANCE]] (0 to 2 arguments), got 3");
  EXPECT_EQ(error_of([] { mods::lookup("t5:2"); }), "mod 't5:2': NUM_BUCKETS must be >= 4, got 2");
  // A table [H, NUM_BUCKETS] of 17 GB was allocated for t5:4294967300; huge windows failed in the IR builder unnamed.
  EXPECT_EQ(error_of([] { mods::lookup("t5:4294967300"); }), "mod 't5:4294967300': NUM_BUCKETS must be <= 65536, got 4294967300");
  EXPECT_EQ(error_of([] { mods::lookup("sliding_window:9223372036854775807"); }),
            "mod 'sliding_window:9223372036854775807': W (window) must be <= 2147483647, got 9223372036854775807");
  EXPECT_EQ(error_of([] { mods::lookup("sliding_window:99999999999999999999"); }),
            "mod 'sliding_window:99999999999999999999': W (window) must be <= 2147483647, got 99999999999999999999");
  EXPECT_EQ(error_of([] { mods::lookup("chunked:-99999999999999999999"); }),
            "mod 'chunked:-99999999999999999999': C (chunk size) must be >= 1, got -99999999999999999999");
}

TEST(Registry, KindIsChecked) {
  EXPECT_EQ(error_of([] { mods::lookup_mask("softcap:30"); }), "'softcap:30' is a score mod, expected a mask mod");
  EXPECT_EQ(error_of([] { mods::lookup_score("causal"); }), "'causal' is a mask mod, expected a score mod");
  EXPECT_NO_THROW(mods::lookup_mask("document:2"));
  EXPECT_NO_THROW(mods::lookup_score("relbias"));
}
