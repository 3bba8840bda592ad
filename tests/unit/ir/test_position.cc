// position_dependence(): the structural test codegen uses to let the sm90 backward sum buffer gradients
// along diagonals. Diagonal answers are checked against the interpreter: shifting q_idx and kv_idx by
// the same amount never changes the value.
#include <gtest/gtest.h>

#include <random>

#include "flexattn/error.h"
#include "flexattn/expr.h"
#include "flexattn/ir_passes.h"
#include "flexattn/ir_text.h"

using namespace flexattn;
using namespace flexattn::ir;
using PD = PositionDependence;

namespace {

Expr Sc() { return scalar("S", DType::I32); }

// T5's bucket shape (mods::t5_bucket lives in flexattn_mods; the codegen tests use the real one).
Expr bucket(Expr rel) {
  Expr n = abs(rel);
  Expr large = 8 + cast(log2(cast(maximum(n, Expr(8)), DType::F32) / 8.0) * 4.0, DType::I32);
  return where(rel > 0, Expr(16), Expr(0)) + where(n < 8, n, minimum(large, Expr(15)));
}

// Evaluates e at (q, kv) with b = 1, h = 2, S = 300 and an [8, 64] buffer "t" of distinct values.
double at(const Expr& e, int64_t q, int64_t kv) {
  static const std::vector<float> data = [] {
    std::vector<float> d(8 * 64);
    for (size_t i = 0; i < d.size(); ++i) d[i] = float(i) * 0.5f - 7.f;
    return d;
  }();
  static const BufferView view{DType::F32, {8, 64}, data.data()};
  EvalEnv env;
  env.scalar = [](const std::string&) { return 300.0; };
  env.buffer = [](const std::string& n) { return n == "t" ? &view : nullptr; };
  env.b = 1, env.h = 2, env.q_idx = q, env.kv_idx = kv, env.score = 0.25;
  return eval(e, env).as_double();
}

}  // namespace

TEST(PositionDependence, RelativeIndicesAreDiagonal) {
  EXPECT_EQ(position_dependence(q_idx() - kv_idx() + Sc() - 1), PD::Diagonal);  // relative bias
  EXPECT_EQ(position_dependence(Sc() - 1 + q_idx() - kv_idx()), PD::Diagonal);  // cancels across the sum
  EXPECT_EQ(position_dependence(kv_idx() - q_idx()), PD::Diagonal);
  EXPECT_EQ(position_dependence(bucket(kv_idx() - q_idx())), PD::Diagonal);
  EXPECT_EQ(position_dependence(bucket(maximum(q_idx() - kv_idx(), Expr(0)))), PD::Diagonal);
  EXPECT_EQ(position_dependence((q_idx() - kv_idx()) * 3 + head()), PD::Diagonal);
  EXPECT_EQ(position_dependence(cast(q_idx(), DType::I64) - cast(kv_idx(), DType::I64)), PD::Diagonal);
  EXPECT_EQ(position_dependence(abs(q_idx() - kv_idx()) / 2.0), PD::Diagonal);
  const Buffer t{"t", DType::F32};
  EXPECT_EQ(position_dependence(t(head(), q_idx() - kv_idx() + 20)), PD::Diagonal);
}

TEST(PositionDependence, PositionFreeValuesAreNone) {
  EXPECT_EQ(position_dependence(head()), PD::None);
  EXPECT_EQ(position_dependence(batch() * 16 + head()), PD::None);
  EXPECT_EQ(position_dependence(Sc() - 1), PD::None);
  EXPECT_EQ(position_dependence(q_idx() - q_idx()), PD::None);  // Affine(0, 0) by structure
  const Buffer t{"t", DType::F32};
  EXPECT_EQ(position_dependence(t(head(), batch())), PD::None);
}

TEST(PositionDependence, EverythingElseIsGeneral) {
  EXPECT_EQ(position_dependence(q_idx()), PD::General);
  EXPECT_EQ(position_dependence(kv_idx() + head()), PD::General);
  EXPECT_EQ(position_dependence(q_idx() + kv_idx()), PD::General);
  EXPECT_EQ(position_dependence(score()), PD::General);
  EXPECT_EQ(position_dependence(q_idx() - kv_idx() + cast(score(), DType::I32)), PD::General);
  EXPECT_EQ(position_dependence(floordiv(q_idx(), 64) - floordiv(kv_idx(), 64)), PD::General);
  // Float arithmetic rounds: f32(q) - f32(kv) is not exactly a function of q - kv.
  EXPECT_EQ(position_dependence(cast(q_idx(), DType::F32) - cast(kv_idx(), DType::F32)), PD::General);
  // Conservative where the coefficients would need a literal's value (literals are runtime values).
  EXPECT_EQ(position_dependence(q_idx() * 2 - kv_idx() * 2), PD::General);
  // An i32 sum that may wrap, widened, is not trusted either.
  EXPECT_EQ(position_dependence(cast(q_idx() + Sc(), DType::I64) - cast(kv_idx(), DType::I64)), PD::General);
}

TEST(PositionDependence, DiagonalValuesAreShiftInvariantInTheInterpreter) {
  const Buffer t{"t", DType::F32};
  const std::vector<Expr> diag = {
      q_idx() - kv_idx() + Sc() - 1,
      Sc() - 1 + q_idx() - kv_idx(),
      bucket(kv_idx() - q_idx()),
      bucket(maximum(q_idx() - kv_idx(), Expr(0))),
      (q_idx() - kv_idx()) * 3 + head(),
      t(head(), q_idx() - kv_idx() + 20),
      cast(q_idx(), DType::I64) - cast(kv_idx(), DType::I64),
  };
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> pos(0, 5000), shift(-4000, 4000);
  for (const Expr& e : diag) {
    ASSERT_EQ(position_dependence(e), PD::Diagonal);
    for (int k = 0; k < 200; ++k) {
      const int64_t q = pos(rng), kv = pos(rng), s = shift(rng);
      if (q + s < 0 || kv + s < 0) continue;
      EXPECT_EQ(at(e, q, kv), at(e, q + s, kv + s)) << print(e) << " at " << q << ", " << kv << " + " << s;
    }
  }
}

// position_dependence recursed once per level: a 100000-long chain (a tracer's output, or the text form's bindings
// past the parser's nesting limit) overflowed the stack.
TEST(PositionDependence, DeepChainsDoNotOverflowTheStack) {
  Expr s = score();
  for (int i = 0; i < 100000; ++i) s = s + Expr(double(i % 7));
  EXPECT_EQ(position_dependence(s), PD::General);
  std::string text = "d0 = q_idx - kv_idx;\n";
  for (int i = 1; i < 100000; ++i) text += "d" + std::to_string(i) + " = d" + std::to_string(i - 1) + " + 1;\n";
  text += "d99999\n";
  EXPECT_EQ(position_dependence(parse(text)), PD::Diagonal);
}

// An empty Expr was dereferenced; print and verify already said so.
TEST(PositionDependence, EmptyExpressionIsAnError) {
  try {
    position_dependence(Expr());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "position_dependence: the expression is empty");
  }
}
