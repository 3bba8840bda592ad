// differentiate(): exact hand cases (torch's backward formulas) and central finite differences in
// double over random smooth expressions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "flexattn/error.h"
#include "flexattn/ir_passes.h"
#include "flexattn/ir_text.h"
#include "unit/ir/random_expr.h"

namespace flexattn::ir {
namespace {

using testing::GenOptions;
using testing::Point;
using testing::RandomExprGen;
using testing::TestBuffer;
using testing::TestWorld;

const double kNaN = std::numeric_limits<double>::quiet_NaN();

Expr f32(double v) { return literal(v, DType::F32, false); }
double at(const Expr& e, double s, int64_t h = 0, int64_t q = 0, int64_t kv = 0, const TestWorld* w = nullptr) {
  EvalEnv env = w ? w->env(Point{s, 0, h, q, kv}) : EvalEnv{};
  env.score = s;
  env.h = h;
  env.q_idx = q;
  env.kv_idx = kv;
  return eval(e, env).as_double();
}
double d_score_at(const Expr& mod, double s) { return at(differentiate(mod, {}).d_score, s); }

// ---- hand cases ------------------------------------------------------------------------------------

TEST(Derivative, Softcap) {
  Expr mod = Expr(30.0) * tanh(score() / Expr(30.0));
  Expr d = differentiate(mod, {}).d_score;
  for (double s : {-100.0, -3.0, 0.0, 0.7, 25.0}) {
    const double t = std::tanh(s / 30.0);
    EXPECT_NEAR(at(d, s), 1.0 - t * t, 1e-15) << print(d);
  }
}

TEST(Derivative, AlibiGradientFlowsToTheSlopeLoad) {
  TestWorld w;
  Buffer slope{"slope", DType::BF16};
  Expr mod = score() + slope(head()) * (kv_idx() - q_idx());
  ScoreModGrad g = differentiate(mod, {"slope"});
  EXPECT_EQ(g.d_score.get(), f32(1.0).get()) << print(g.d_score);
  ASSERT_EQ(g.loads.size(), 1u);
  EXPECT_EQ(g.loads[0].load.get(), slope(head()).get());
  EXPECT_EQ(g.loads[0].derivative.get(), cast(kv_idx() - q_idx(), DType::F32).get()) << print(g.loads[0].derivative);
  EXPECT_EQ(at(g.loads[0].derivative, 0.0, 3, 10, 4, &w), -6.0);
}

TEST(Derivative, RelativeBiasHasUnitGradient) {
  Buffer bias{"bias"};
  Expr mod = score() + bias(head(), q_idx() - kv_idx());
  ScoreModGrad g = differentiate(mod, {"bias"});
  EXPECT_EQ(g.d_score.get(), f32(1.0).get());
  ASSERT_EQ(g.loads.size(), 1u);
  EXPECT_EQ(g.loads[0].derivative.get(), f32(1.0).get()) << print(g.loads[0].derivative);
}

TEST(Derivative, ModThatIgnoresScoreHasZeroScoreGradient) {
  Buffer bias{"bias"};
  ScoreModGrad g = differentiate(bias(head(), q_idx()) * 2.0, {});
  EXPECT_EQ(g.d_score.get(), f32(0.0).get());
  EXPECT_TRUE(g.loads.empty());  // bias was not asked for
  EXPECT_EQ(differentiate(f32(3.0), {}).d_score.get(), f32(0.0).get());
}

TEST(Derivative, EachDistinctLoadGetsItsOwnGradient) {
  Buffer bias{"bias"};
  Expr a = bias(head(), q_idx()), b = bias(head(), kv_idx());
  ScoreModGrad g = differentiate(score() * a + b * b + a, {"bias"});
  ASSERT_EQ(g.loads.size(), 2u);  // bias[h, q] twice is one node
  std::map<const Node*, Expr> d;
  for (const auto& l : g.loads) d[l.load.get()] = l.derivative;
  ASSERT_TRUE(d.count(a.get()) && d.count(b.get()));
  TestWorld w;
  const Point p{1.5, 0, 2, 7, 9};
  const double bv = eval(b, w.env(p)).f;
  EXPECT_DOUBLE_EQ(eval(d[a.get()], w.env(p)).f, 1.5 + 1.0);
  EXPECT_DOUBLE_EQ(eval(d[b.get()], w.env(p)).f, 2 * bv);
}

TEST(Derivative, MaxAndMinSplitTiesLikeTorch) {
  Expr mx = maximum(score(), f32(0.0)), mn = minimum(score(), f32(0.0));
  EXPECT_EQ(d_score_at(mx, 2.0), 1.0);
  EXPECT_EQ(d_score_at(mx, -2.0), 0.0);
  EXPECT_EQ(d_score_at(mx, 0.0), 0.5);  // torch: where(a == b, grad / 2, grad)
  EXPECT_EQ(d_score_at(mn, 2.0), 0.0);
  EXPECT_EQ(d_score_at(mn, -2.0), 1.0);
  EXPECT_EQ(d_score_at(mn, 0.0), 0.5);
  // max(x, x): both halves reach x.
  EXPECT_EQ(d_score_at(maximum(score(), score()), 3.0), 1.0);
  // NaN: neither comparison holds, so torch gives the full gradient to both operands.
  EXPECT_EQ(d_score_at(mx, kNaN), 1.0);
  EXPECT_EQ(d_score_at(maximum(f32(kNaN), score()), 1.0), 1.0);
}

TEST(Derivative, AbsUsesTorchSign) {
  Expr mod = abs(score());
  EXPECT_EQ(d_score_at(mod, -2.0), -1.0);
  EXPECT_EQ(d_score_at(mod, 3.0), 1.0);
  EXPECT_EQ(d_score_at(mod, 0.0), 0.0);
  EXPECT_EQ(d_score_at(mod, -0.0), 0.0);
  EXPECT_EQ(d_score_at(mod, kNaN), 0.0);  // torch.sign(nan) == 0
}

TEST(Derivative, Pow) {
  EXPECT_DOUBLE_EQ(d_score_at(pow(score(), 2), 3.0), 6.0);
  EXPECT_DOUBLE_EQ(d_score_at(pow(score(), 0.5), 4.0), 0.25);
  EXPECT_NEAR(d_score_at(pow(2.0, score()), 3.0), 8.0 * std::log(2.0), 1e-14);
  // torch's special cases: exponent 0 -> no gradient to the base; base 0 with exponent >= 0 -> no
  // gradient to the exponent (instead of 0 * log 0 = NaN).
  EXPECT_EQ(d_score_at(pow(score(), 0), 0.0), 0.0);
  EXPECT_EQ(d_score_at(pow(f32(0.0), score()), 2.0), 0.0);
  EXPECT_TRUE(std::isinf(d_score_at(pow(f32(0.0), score()), -1.0)) ||
              std::isnan(d_score_at(pow(f32(0.0), score()), -1.0)));
}

TEST(Derivative, ModFloorDivAndRoundingOps) {
  EXPECT_EQ(d_score_at(score() % 3.0, 7.5), 1.0);
  EXPECT_EQ(d_score_at(Expr(7.5) % score(), 2.0), -3.0);   // -floor(7.5 / 2)
  EXPECT_EQ(d_score_at(Expr(-7.5) % score(), 2.0), 4.0);   // -floor(-3.75)
  EXPECT_EQ(d_score_at(floordiv(score(), 2.0), 3.0), 0.0);
  EXPECT_EQ(differentiate(floor(score()) + ceil(score()), {}).d_score.get(), f32(0.0).get());
  EXPECT_EQ(differentiate(cast(cast(score(), DType::I32), DType::F32), {}).d_score.get(), f32(0.0).get());
  EXPECT_EQ(differentiate(cast(score() > 0.0, DType::F32) * 5.0, {}).d_score.get(), f32(0.0).get());
}

TEST(Derivative, WherePicksTheBranchGradient) {
  Expr mod = where(score() > 0.0, score() * 2.0, score() * score());
  EXPECT_EQ(d_score_at(mod, 1.0), 2.0);
  EXPECT_EQ(d_score_at(mod, -3.0), -6.0);
  // The untaken branch receives a zero gradient (where(c, g, 0)), as in torch; like torch, log's
  // backward then computes 0 / score, which is NaN only at score == 0.
  Expr guarded = where(score() > 0.0, log(score()), score());
  EXPECT_EQ(d_score_at(guarded, -1.0), 1.0);
  EXPECT_TRUE(std::isnan(d_score_at(guarded, 0.0)));
}

TEST(Derivative, UnaryFormulas) {
  const double x = 0.6;
  const double sg = 1.0 / (1.0 + std::exp(-x));
  EXPECT_NEAR(d_score_at(exp(score()), x), std::exp(x), 1e-15);
  EXPECT_NEAR(d_score_at(exp2(score()), x), std::exp2(x) * std::log(2.0), 1e-15);
  EXPECT_NEAR(d_score_at(log(score()), x), 1.0 / x, 1e-15);
  EXPECT_NEAR(d_score_at(log2(score()), x), 1.0 / (x * std::log(2.0)), 1e-15);
  EXPECT_NEAR(d_score_at(sqrt(score()), x), 0.5 / std::sqrt(x), 1e-15);
  EXPECT_NEAR(d_score_at(rsqrt(score()), x), -0.5 * std::pow(x, -1.5), 1e-14);
  EXPECT_NEAR(d_score_at(tanh(score()), x), 1.0 - std::tanh(x) * std::tanh(x), 1e-15);
  EXPECT_NEAR(d_score_at(sigmoid(score()), x), sg * (1.0 - sg), 1e-15);
  EXPECT_NEAR(d_score_at(sin(score()), x), std::cos(x), 1e-15);
  EXPECT_NEAR(d_score_at(cos(score()), x), -std::sin(x), 1e-15);
  EXPECT_NEAR(d_score_at(tan(score()), x), 1.0 / (std::cos(x) * std::cos(x)), 1e-14);
  EXPECT_NEAR(d_score_at(erf(score()), x), 2.0 / std::sqrt(M_PI) * std::exp(-x * x), 1e-14);
  EXPECT_NEAR(d_score_at(tanh_approx(score()), x), 1.0 - std::tanh(x) * std::tanh(x), 1e-15);
  EXPECT_NEAR(d_score_at(Expr(2.0) / score(), x), -2.0 / (x * x), 1e-14);
  EXPECT_EQ(d_score_at(-score(), x), -1.0);
  // Tensor.detach(): the value flows, the gradient does not (torch's s + 0.5 * s.detach() has slope 1)
  EXPECT_EQ(d_score_at(detach(score()), x), 0.0);
  EXPECT_EQ(d_score_at(score() + detach(score()) * 0.5, x), 1.0);
  EXPECT_NEAR(d_score_at(score() * detach(exp(score())), x), std::exp(x), 1e-14);
}

TEST(Derivative, GradientsOfBf16AndF16LoadsAreListed) {
  Buffer slope{"slope", DType::BF16}, tab{"tab", DType::F16}, doc{"doc", DType::I32};
  Expr mod = score() * slope(head()) + tab(head(), q_idx(), kv_idx()) + cast(doc(kv_idx()), DType::F32);
  ScoreModGrad g = differentiate(mod, {"slope", "tab", "absent"});
  ASSERT_EQ(g.loads.size(), 2u);
  EXPECT_EQ(g.loads[0].load->name, "slope");
  EXPECT_EQ(g.loads[0].derivative.get(), score().get());
  EXPECT_EQ(g.loads[1].load->name, "tab");
  EXPECT_EQ(g.loads[1].derivative.get(), f32(1.0).get());
}

TEST(Derivative, RejectsGradientsOfIntegerBuffersWithAMessage) {
  Buffer doc{"doc", DType::I32};
  Expr mod = score() + cast(doc(kv_idx()), DType::F32);
  try {
    differentiate(mod, {"doc"});
    FAIL() << "expected flexattn::Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("grad_buffers"), std::string::npos) << m;
    EXPECT_NE(m.find("'doc'"), std::string::npos) << m;
    EXPECT_NE(m.find("i32"), std::string::npos) << m;
    EXPECT_NE(m.find("float"), std::string::npos) << m;
  }
  try {
    differentiate(Expr(), {});
    FAIL() << "expected flexattn::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("score_mod"), std::string::npos) << e.what();
  }
}

TEST(Derivative, HandlesLongChains) {
  Expr e = score();
  for (int i = 0; i < 1500; ++i) e = e * scalar("a") + Expr(0.5);
  Expr d;
  ASSERT_TRUE(testing::on_small_stack([&] { d = differentiate(e, {}).d_score; }));
  EvalEnv env;
  env.scalar = [](const std::string&) { return 1.0; };
  EXPECT_EQ(eval(d, env).f, 1.0);
}

// Every random expression (all ops, edge literals, every buffer) differentiates to f32 expressions
// that are simplified and evaluate everywhere without error.
TEST(DerivativeProperty, DifferentiatesEveryRandomExpression) {
  TestWorld world;
  const auto pts = testing::edge_points();
  for (uint64_t seed = 0; seed < 10; ++seed) {
    RandomExprGen gen(world, 500 + seed);
    for (int i = 0; i < 60; ++i) {
      Expr mod = gen.score_mod();
      ScoreModGrad g = differentiate(mod, {"bias", "edge", "slope", "tab"});
      std::vector<Expr> outs{g.d_score};
      for (const auto& l : g.loads) {
        ASSERT_EQ(l.load->op, Op::Load);
        outs.push_back(l.derivative);
      }
      for (const Expr& d : outs) {
        ASSERT_EQ(d.type(), DType::F32) << print(d);
        ASSERT_EQ(simplify(d).get(), d.get()) << print(d);
        ASSERT_NO_THROW(verify(d, "derivative")) << print(d);
        Evaluator ev(d);
        ev.bind(world.env(pts[0]));
        for (size_t k = 0; k < pts.size(); k += 7) ev.run(pts[k].score, pts[k].b, pts[k].h, pts[k].q, pts[k].kv);
      }
    }
  }
}

// ---- finite differences --------------------------------------------------------------------------

// Central differences of f around x at steps h and h / 2; `set` applies a value and returns the one
// actually used (a buffer element rounds it to f32), so the quotient uses the true step.
struct Fd {
  double value;
  bool stable;  // both steps agree: no kink or jump within h of x
};
template <typename Set, typename F>
Fd central(Set set, F f, double x, double h) {
  auto fd = [&](double step) {
    const double hi = set(x + step);
    const double fp = f();
    const double lo = set(x - step);
    const double fm = f();
    return (fp - fm) / (hi - lo);
  };
  const double a = fd(h), b = fd(h / 2);
  set(x);
  const bool ok = std::isfinite(a) && std::isfinite(b) && std::fabs(a - b) <= 1e-6 * std::max(1.0, std::fabs(b));
  return {b, ok};
}

TEST(DerivativeProperty, MatchesFiniteDifferencesOnRandomSmoothExpressions) {
  TestWorld world;
  TestBuffer* bias = world.find("bias");
  std::mt19937_64 rng(77);
  std::uniform_real_distribution<double> us(-3.0, 3.0);
  int checked_score = 0, checked_load = 0, attempts = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    RandomExprGen gen(world, 1000 + seed, GenOptions{4, true, true, true, 0.1});
    for (int i = 0; i < 20; ++i) {
      Expr mod = gen.score_mod();
      ScoreModGrad g = differentiate(mod, {"bias"});
      ASSERT_EQ(simplify(g.d_score).get(), g.d_score.get()) << "result not simplified";
      Evaluator f(mod), df(g.d_score);
      f.bind(world.env(Point{}));
      df.bind(world.env(Point{}));
      for (int k = 0; k < 4; ++k, ++attempts) {
        const Point p{us(rng), int64_t(rng() % 2), int64_t(rng() % 4), int64_t(rng() % 200), int64_t(rng() % 200)};
        const double y = f.run(p.score, p.b, p.h, p.q, p.kv).f;
        if (!std::isfinite(y) || std::fabs(y) > 1e8) continue;
        // Where an intermediate overflows (sigmoid(exp2(huge))), torch's backward formulas give
        // 0 * inf = NaN while the limit is finite; we follow torch, so such points are not compared.
        bool all_finite = true;
        for (const Value& v : f.values()) all_finite = all_finite && (v.type != DType::F32 || std::isfinite(v.f));
        if (!all_finite) continue;
        // d / d score
        double s = p.score;
        Fd fd = central([&](double v) { return s = v; }, [&] { return f.run(s, p.b, p.h, p.q, p.kv).f; }, p.score,
                        1e-4 * std::max(1.0, std::fabs(p.score)));
        if (fd.stable) {
          const double d = df.run(p.score, p.b, p.h, p.q, p.kv).f;
          ASSERT_NEAR(d, fd.value, 1e-5 * std::max(1.0, std::fabs(fd.value)))
              << print(mod) << "\n  d/dscore = " << print(g.d_score) << "\n  at score=" << p.score << " h=" << p.h
              << " q=" << p.q << " kv=" << p.kv;
          ++checked_score;
        }
        // d / d bias[e]: loads reading the same element add up (scatter-add in the backward).
        std::map<int64_t, double> by_element;
        const EvalEnv env = world.env(p);
        for (const LoadGrad& lg : g.loads) {
          int64_t flat = 0;
          for (size_t d = 0; d < lg.load->args.size(); ++d)
            flat = flat * bias->shape[d] + clamp_index(eval(Expr(lg.load->args[d]), env).i, bias->shape[d]);
          by_element[flat] += eval(lg.derivative, env).f;
        }
        for (const auto& [flat, d] : by_element) {
          const double orig = bias->get(flat);
          auto set = [&](double v) {
            bias->set(flat, v);
            return bias->get(flat);
          };
          Fd fl = central(set, [&] { return f.run(p.score, p.b, p.h, p.q, p.kv).f; }, orig, 1.0 / 8192);
          ASSERT_EQ(bias->get(flat), orig);
          if (!fl.stable) continue;
          ASSERT_NEAR(d, fl.value, 1e-5 * std::max(1.0, std::fabs(fl.value)))
              << print(mod) << "\n  element " << flat << " at score=" << p.score;
          ++checked_load;
        }
      }
    }
  }
  std::printf("checked %d score and %d load derivatives at %d points\n", checked_score, checked_load, attempts);
  // Most points are smooth; if few were checked the test would prove nothing.
  EXPECT_GT(checked_score, attempts / 2) << checked_score << " of " << attempts;
  EXPECT_GT(checked_load, 300) << checked_load;
}

}  // namespace
}  // namespace flexattn::ir
