// simplify(): meaning is kept bit for bit on random expressions and edge environments; hand cases
// for each rule family, for the IEEE traps it must avoid, for folding and for idempotence.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "flexattn/ir_passes.h"
#include "flexattn/ir_text.h"
#include "unit/ir/random_expr.h"

namespace flexattn::ir {
namespace {

using testing::edge_points;
using testing::on_small_stack;
using testing::GenOptions;
using testing::Point;
using testing::RandomExprGen;
using testing::same_value;
using testing::TestWorld;
using testing::value_text;

size_t node_count(const Expr& e) { return topo_order(e).size(); }
const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Checks eval(simplify(e)) == eval(e) at every point; returns false (with a gtest failure) on the
// first difference.
bool same_everywhere(const Expr& e, const Expr& s, const TestWorld& world, const std::vector<Point>& pts) {
  Evaluator a(e), b(s);
  a.bind(world.env(pts[0]));
  b.bind(world.env(pts[0]));
  for (const Point& p : pts) {
    Value va = a.run(p.score, p.b, p.h, p.q, p.kv);
    Value vb = b.run(p.score, p.b, p.h, p.q, p.kv);
    if (!same_value(va, vb)) {
      ADD_FAILURE() << "meaning changed at score=" << p.score << " b=" << p.b << " h=" << p.h << " q=" << p.q
                    << " kv=" << p.kv << "\n  before: " << print(e) << " = " << value_text(va)
                    << "\n  after:  " << print(s) << " = " << value_text(vb);
      return false;
    }
  }
  return true;
}

TEST(SimplifyProperty, KeepsMeaningBitForBitOnRandomExpressions) {
  TestWorld world;
  const auto pts = edge_points();
  size_t shrunk = 0, total = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    RandomExprGen gen(world, seed, GenOptions{});
    for (int i = 0; i < 100; ++i, ++total) {
      Expr e = i % 3 == 0 ? gen.score_mod() : (i % 3 == 1 ? gen.any(4) : gen.mask_mod());
      Expr s = simplify(e);
      ASSERT_EQ(s.type(), e.type()) << print(e);
      verify(e, "random");
      ASSERT_NO_THROW(verify(s, "simplified")) << print(e) << "\n  -> " << print(s);
      ASSERT_TRUE(same_everywhere(e, s, world, pts)) << "seed " << seed << " expr " << i;
      shrunk += node_count(s) < node_count(e);
    }
  }
  // The generator plants identity patterns; if simplify stopped firing this test would be vacuous.
  EXPECT_GT(shrunk, total / 4) << "simplify shrank only " << shrunk << " of " << total;
}

TEST(SimplifyProperty, KeepsMeaningWithEdgeScalarValues) {
  TestWorld world;
  world.set_scalar("alpha", kNaN);
  world.set_scalar("gamma", -kInf);
  world.set_scalar("offset", 2147483647);
  world.set_scalar("window", 0);
  world.set_scalar("causal", 0);
  const auto pts = edge_points(99);
  for (uint64_t seed = 100; seed < 110; ++seed) {
    RandomExprGen gen(world, seed, GenOptions{5, false, true, true, 0.3});
    for (int i = 0; i < 100; ++i) {
      Expr e = gen.any(5);
      ASSERT_TRUE(same_everywhere(e, simplify(e), world, pts)) << "seed " << seed << " expr " << i;
    }
  }
}

TEST(SimplifyProperty, IsIdempotent) {
  TestWorld world;
  for (uint64_t seed = 200; seed < 210; ++seed) {
    RandomExprGen gen(world, seed);
    for (int i = 0; i < 100; ++i) {
      Expr s = simplify(gen.any(5));
      Expr s2 = simplify(s);
      ASSERT_EQ(s.get(), s2.get()) << print(s) << "\n  became " << print(s2);
    }
  }
}

TEST(SimplifyProperty, GeneratorCoversEveryOp) {
  TestWorld world;
  std::set<Op> seen;
  std::set<DType> load_dtypes;
  std::set<size_t> ranks;
  RandomExprGen gen(world, 5);
  for (int i = 0; i < 600; ++i) {
    for (const Node* n : topo_order(gen.any(4))) {
      seen.insert(n->op);
      if (n->op == Op::Load) {
        load_dtypes.insert(n->buffer_dtype);
        ranks.insert(n->args.size());
      }
    }
  }
  for (int k = 0; k < kNumOps; ++k) EXPECT_TRUE(seen.count(Op(k))) << "never generated: " << op_name(Op(k));
  EXPECT_EQ(load_dtypes.size(), 6u);  // f32, bf16, f16, i32, i64, bool
  EXPECT_EQ(ranks, (std::set<size_t>{1, 2, 3, 4}));
}

// ---- hand cases ----------------------------------------------------------------------------------

Expr lit(double v, DType t, bool weak = false) { return literal(v, t, weak); }
Expr s_() { return score(); }
Expr iq() { return q_idx(); }

void expect_simplifies(const Expr& e, const Expr& want) {
  Expr got = simplify(e);
  EXPECT_EQ(got.get(), want.get()) << print(e) << "\n  simplified to " << print(got) << "\n  expected " << print(want);
}
void expect_kept(const Expr& e) { expect_simplifies(e, e); }

TEST(Simplify, AdditiveIdentities) {
  expect_simplifies(iq() + 0, iq());
  expect_simplifies(Expr(0) + iq(), iq());
  expect_simplifies(s_() + Expr(-0.0), s_());
  expect_simplifies(Expr(-0.0) + s_(), s_());
  expect_simplifies(s_() - 0.0, s_());
  expect_simplifies(s_() - 0, s_());  // int 0 converts to +0.0, and x - (+0) == x for x = -0 too
  expect_simplifies(iq() - iq(), lit(0, DType::I32));
  expect_simplifies(Expr(0) - iq(), -iq());
  expect_simplifies(Expr(-0.0) - s_(), -s_());
  expect_simplifies(s_() + (-scalar("a")), s_() - scalar("a"));
  expect_simplifies(s_() - (-scalar("a")), s_() + scalar("a"));
  expect_simplifies(-(-s_()), s_());
  // An int converts to a float that is never -0, so +0.0 is an identity for it.
  expect_simplifies(iq() + 0.0, cast(iq(), DType::F32));
  expect_simplifies(iq() + Expr(-0.0), cast(iq(), DType::F32));
}

TEST(Simplify, FloatAdditiveTrapsAreLeftAlone) {
  expect_kept(s_() + 0.0);            // -0 + 0 = +0
  expect_kept(Expr(0.0) + s_());
  expect_kept(s_() + 0);              // the int 0 is +0.0 after promotion
  expect_kept(s_() - s_());           // inf - inf = NaN
  expect_kept(Expr(0.0) - s_());      // 0 - 0 = +0 but -(0) = -0
  expect_kept(-(s_() - scalar("a")));  // -(a - a) = -0, (a - a) = +0
}

TEST(Simplify, MultiplicativeIdentities) {
  expect_simplifies(s_() * 1, s_());
  expect_simplifies(Expr(1.0) * s_(), s_());
  expect_simplifies(s_() * Expr(true), s_());
  expect_simplifies(iq() * 0, lit(0, DType::I32));  // a Python-int 0 does not widen the i32 q
  expect_simplifies(s_() * -1, -s_());
  expect_simplifies((-s_()) * (-scalar("a")), s_() * scalar("a"));
  expect_simplifies(s_() / 1, s_());
  expect_simplifies((-s_()) / (-scalar("a")), s_() / scalar("a"));
  expect_simplifies(floordiv(iq(), 1), iq());
  expect_simplifies(floordiv(iq(), 0), lit(0, DType::I32));
  expect_simplifies(iq() % 1, lit(0, DType::I32));
  expect_simplifies(iq() % -1, lit(0, DType::I32));
  expect_simplifies(iq() % 0, lit(0, DType::I32));
  expect_simplifies(pow(s_(), 1), s_());
  expect_simplifies(pow(s_(), 0), lit(1, DType::F32));
}

TEST(Simplify, FloatMultiplicativeTrapsAreLeftAlone) {
  expect_kept(s_() * 0.0);  // inf * 0 = NaN, -1 * 0 = -0
  expect_kept(s_() * 0);
  expect_kept(s_() / s_());  // 0 / 0 = NaN
  expect_kept(floordiv(s_(), 1.0));
  expect_kept(s_() % 1.0);
  expect_simplifies(iq() / 1, cast(iq(), DType::F32));  // true division: the f32 value of q
}

TEST(Simplify, UnaryCastAndMinMax) {
  expect_simplifies(abs(abs(s_())), abs(s_()));
  expect_simplifies(abs(-s_()), abs(s_()));
  expect_simplifies(floor(floor(s_())), floor(s_()));
  expect_simplifies(floor(ceil(s_())), ceil(s_()));
  expect_simplifies(ceil(floor(s_())), floor(s_()));
  expect_simplifies(make_node(Op::Cast, DType::I32, false, {iq()}), iq());
  expect_simplifies(cast(cast(iq(), DType::I64), DType::I32), iq());
  expect_simplifies(cast(cast(iq() > 0, DType::F32), DType::Bool), iq() > 0);
  expect_kept(cast(cast(s_(), DType::I32), DType::F32));    // truncation
  expect_kept(cast(cast(scalar("w", DType::I64), DType::I32), DType::I64));  // wraps
  expect_simplifies(minimum(s_(), s_()), s_());
  expect_simplifies(maximum(iq(), iq()), iq());
}

TEST(Simplify, ComparisonsOfIdenticalOperandsOnlyForIntegers) {
  const Expr t = lit(1, DType::Bool), f = lit(0, DType::Bool);
  expect_simplifies(binary(Op::Eq, iq(), iq()), t);
  expect_simplifies(iq() <= iq(), t);
  expect_simplifies(iq() >= iq(), t);
  expect_simplifies(binary(Op::Ne, iq(), iq()), f);
  expect_simplifies(iq() < iq(), f);
  expect_simplifies(iq() > iq(), f);
  expect_kept(binary(Op::Eq, s_(), s_()));  // NaN != NaN
  expect_kept(s_() <= s_());
  expect_kept(binary(Op::Ne, s_(), s_()));
}

TEST(Simplify, Logic) {
  Expr b = iq() >= kv_idx();
  Expr c = s_() < 0.0;
  expect_simplifies(!(!b), b);
  expect_simplifies(b && Expr(true), b);
  expect_simplifies(Expr(false) && b, lit(0, DType::Bool));
  expect_simplifies(b || Expr(false), b);
  expect_simplifies(Expr(true) || b, lit(1, DType::Bool));
  expect_simplifies(b && b, b);
  expect_simplifies(b || b, b);
  expect_simplifies(!binary(Op::Eq, s_(), 1.0), binary(Op::Ne, s_(), 1.0));  // exact with NaN too
  expect_simplifies(!(iq() < kv_idx()), iq() >= kv_idx());
  expect_kept(!c);  // !(NaN < 0) is true but NaN >= 0 is false
}

TEST(Simplify, Where) {
  Expr c = s_() < 0.0;  // a float comparison: not itself invertible, so !c stays a Not
  expect_simplifies(where(Expr(true), s_(), s_() * 2.0), s_());
  expect_simplifies(where(Expr(false), s_(), s_() * 2.0), s_() * 2.0);
  expect_simplifies(where(c, s_(), s_()), s_());
  expect_simplifies(where(!c, s_(), s_() * 2.0), where(c, s_() * 2.0, s_()));
  expect_simplifies(where(c, Expr(true), Expr(false)), c);
  expect_simplifies(where(c, Expr(false), Expr(true)), !c);
  // The chosen branch is converted the way the where converts it.
  Expr w = where(Expr(true), iq(), s_());
  Expr got = simplify(w);
  EXPECT_EQ(got.type(), DType::F32);
  EXPECT_EQ(got->op, Op::Cast);
}

// A Python-int where (weak i64) plus a strong i64 zero is a strong i64; replacing it by the weak
// where would make the comparison below convert 2^40 to i32 (0) instead of widening q.
TEST(Simplify, KeepsTheWeaknessOfIntegers) {
  Expr w = where(iq() >= 0, Expr(int64_t(1) << 40), Expr(7));
  ASSERT_TRUE(w->weak);
  Expr e = (w + lit(0, DType::I64)) < iq();
  Expr s = simplify(e);
  EvalEnv env;
  env.q_idx = 5;
  EXPECT_EQ(eval(s, env).i, eval(e, env).i) << print(s);
  EXPECT_EQ(eval(e, env).i, 0);
}

TEST(Simplify, ConstantFoldingUsesTheInterpreter) {
  // i32 wraps like torch.
  expect_simplifies(lit(2147483647, DType::I32) + lit(1, DType::I32), lit(-2147483648.0, DType::I32));
  // Result keeps the node's type and weakness: two Python scalars stay a Python scalar.
  Expr w = simplify(Expr(2.0) * Expr(3.0));
  EXPECT_EQ(w->op, Op::Literal);
  EXPECT_TRUE(w->weak);
  EXPECT_EQ(w->value, 6.0);
  Expr strong = simplify(lit(2.0, DType::F32) * Expr(3.0));
  EXPECT_FALSE(strong->weak);
  // -0.0 and NaN survive folding exactly.
  Expr nz = simplify(Expr(-1.0) * Expr(0.0));
  ASSERT_EQ(nz->op, Op::Literal);
  EXPECT_TRUE(std::signbit(nz->value));
  Expr nan = simplify(Expr(kInf) - Expr(kInf));
  ASSERT_EQ(nan->op, Op::Literal);
  EXPECT_TRUE(std::isnan(nan->value));
  // Folding is bottom-up through several levels, and stops at runtime inputs.
  expect_simplifies(s_() * (Expr(2.0) + Expr(1.0)), s_() * Expr(3.0));
  // 2^53 + 1 has no exact double literal: it stays an expression; 2^54 has one.
  Expr big = lit(double(int64_t(1) << 53), DType::I64) + lit(1, DType::I64);
  EXPECT_NE(simplify(big)->op, Op::Literal);
  Expr pow2 = simplify(lit(double(int64_t(1) << 53), DType::I64) * lit(2, DType::I64));
  ASSERT_EQ(pow2->op, Op::Literal);
  EXPECT_EQ(pow2->value, 18014398509481984.0);
  // A load with literal indices reads a runtime buffer: never folded.
  Expr ld = load("bias", DType::F32, {Expr(0), Expr(1)});
  expect_kept(ld);
}

TEST(Simplify, LiteralValuesStayRuntimeParametersExceptIdentities) {
  auto softcap = [](double c) { return Expr(c) * tanh(score() / Expr(c)); };
  EXPECT_EQ(structural_key(simplify(softcap(20.0))), structural_key(simplify(softcap(30.0))));
  EXPECT_EQ(structural_key(simplify(s_() * 2.0)), structural_key(simplify(s_() * 3.0)));
  // An identity element is the documented exception.
  EXPECT_NE(structural_key(simplify(s_() * 1.0)), structural_key(simplify(s_() * 2.0)));
}

// Tracers produce long chains; the walk must not recurse once per level.
TEST(Simplify, HandlesLongChains) {
  Expr e = score();
  for (int i = 0; i < 1500; ++i) e = (e + Expr(-0.0)) * scalar("a");
  Expr s;
  ASSERT_TRUE(on_small_stack([&] { s = simplify(e); }));  // e is destroyed later, on the main stack
  EXPECT_EQ(node_count(s), 1500u + 2u);
  EvalEnv env;
  env.score = -0.0;
  env.scalar = [](const std::string&) { return 1.0; };
  EXPECT_TRUE(std::signbit(eval(s, env).f));
}

// The rewritten copy of a long chain that a where(false, ...) then discards is garbage inside
// simplify; freeing it must not recurse once per level either.
TEST(Simplify, FreesDiscardedLongChainsWithoutDeepRecursion) {
  Expr e = score();
  for (int i = 0; i < 1500; ++i) e = (e + Expr(-0.0)) * scalar("a");
  Expr w = where(Expr(false), e, score());
  Expr s;
  ASSERT_TRUE(on_small_stack([&] { s = simplify(w); }, 32));
  EXPECT_EQ(s.get(), score().get());
}

TEST(Simplify, NullExpressionPassesThrough) { EXPECT_TRUE(simplify(Expr()).empty()); }

}  // namespace
}  // namespace flexattn::ir
