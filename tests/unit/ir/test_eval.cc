// The interpreter is the definition of every node: these pin the definitions that differ between
// languages (Python floor division and modulo, wrapping, saturating casts, NaN handling).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "flexattn/error.h"
#include "flexattn/expr.h"
#include "flexattn/variant.h"
#include "error_of.h"

using namespace flexattn;
using namespace flexattn::ir;

namespace {
double evf(Expr e, double s = 0, int64_t q = 0, int64_t kv = 0) {
  EvalEnv env;
  env.score = s;
  env.q_idx = q;
  env.kv_idx = kv;
  return eval(e, env).as_double();
}
int64_t evi(Expr e, int64_t q = 0, int64_t kv = 0) {
  EvalEnv env;
  env.q_idx = q;
  env.kv_idx = kv;
  Value v = eval(e, env);
  EXPECT_NE(v.type, DType::F32);
  return v.i;
}
}  // namespace

TEST(Eval, PythonFloorDivisionAndModuloOnIntegers) {
  EXPECT_EQ(evi(floordiv(q_idx(), kv_idx()), -7, 2), -4);
  EXPECT_EQ(evi(mod(q_idx(), kv_idx()), -7, 2), 1);
  EXPECT_EQ(evi(mod(q_idx(), kv_idx()), 7, -2), -1);
  EXPECT_EQ(evi(floordiv(q_idx(), kv_idx()), 7, -2), -4);
  EXPECT_EQ(evi(floordiv(q_idx(), kv_idx()), 7, 0), 0);  // defined as 0 (torch: error / undefined)
  EXPECT_EQ(evi(mod(q_idx(), kv_idx()), 7, 0), 0);
}

TEST(Eval, PythonFloorDivisionAndModuloOnFloats) {
  EXPECT_EQ(evf(floordiv(score(), 2.0), -7.5), -4.0);
  EXPECT_EQ(evf(mod(score(), 2.0), -7.5), 0.5);
  EXPECT_EQ(evf(mod(score(), -2.0), 7.5), -0.5);
  EXPECT_TRUE(std::isinf(evf(floordiv(score(), 0.0), 1.0)));
  EXPECT_TRUE(std::isnan(evf(mod(score(), 0.0), 1.0)));
}

TEST(Eval, Int32WrapsLikeTorch) {
  EXPECT_EQ(evi(q_idx() * 65536 * 65536, 3), 0);
  EXPECT_EQ(evi(q_idx() + 2147483647, 1), -2147483648LL);
  EXPECT_EQ(evi(cast(q_idx(), DType::I64) + 2147483647, 1), 2147483648LL);
}

TEST(Eval, FloatToIntCastsSaturateAndMapNanToZero) {
  EXPECT_EQ(evi(cast(score() + 0.0, DType::I32) + q_idx()), 0);
  EvalEnv env;
  env.score = std::nan("");
  EXPECT_EQ(eval(cast(score(), DType::I32), env).i, 0);
  env.score = 1e20;
  EXPECT_EQ(eval(cast(score(), DType::I32), env).i, 2147483647);
  env.score = -2.7;
  EXPECT_EQ(eval(cast(score(), DType::I32), env).i, -2);  // truncation
}

TEST(Eval, MinimumAndMaximumPropagateNan) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(std::isnan(evf(minimum(score(), 1.0), nan)));
  EXPECT_TRUE(std::isnan(evf(maximum(score(), 1.0), nan)));
  EXPECT_EQ(evf(minimum(score(), 1.0), 3.0), 1.0);
}

TEST(Eval, ComparisonsWithNanAreFalseExceptNotEqual) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EvalEnv env;
  env.score = nan;
  EXPECT_FALSE(eval(score() < 0.0, env).as_bool());
  EXPECT_FALSE(eval(score() >= 0.0, env).as_bool());
  EXPECT_FALSE(eval(score() == score(), env).as_bool());
  EXPECT_TRUE(eval(score() != score(), env).as_bool());
}

TEST(Eval, MathFunctions) {
  EXPECT_DOUBLE_EQ(evf(sigmoid(score()), 0.0), 0.5);
  EXPECT_DOUBLE_EQ(evf(Expr(30.0) * tanh(score() / 30.0), 15.0), 30.0 * std::tanh(0.5));
  EXPECT_DOUBLE_EQ(evf(rsqrt(score()), 4.0), 0.5);
  EXPECT_DOUBLE_EQ(evf(exp2(score()), 3.0), 8.0);
  EXPECT_EQ(evi(pow(q_idx(), 3), 2), 8);
  EXPECT_EQ(evi(pow(q_idx(), -1), 2), 0);
  EXPECT_EQ(evi(where(q_idx() >= kv_idx(), q_idx(), kv_idx()), 3, 5), 5);
  EXPECT_DOUBLE_EQ(evf(q_idx() / kv_idx(), 0, 1, 4), 0.25);
}

TEST(Eval, BufferLoadsWrapNegativeIndicesAndClamp) {
  float bias[2][3] = {{1, 2, 3}, {4, 5, 6}};
  BufferView view{DType::F32, {2, 3}, bias};
  EvalEnv env;
  env.buffer = [&](const std::string& n) { return n == "bias" ? &view : nullptr; };
  Expr e = load("bias", DType::F32, {head(), q_idx() - kv_idx()});
  env.h = 1;
  env.q_idx = 2;
  env.kv_idx = 0;
  EXPECT_EQ(eval(e, env).f, 6.0);
  env.kv_idx = 3;  // index -1 wraps to the last element, like Python
  EXPECT_EQ(eval(e, env).f, 6.0);
  env.kv_idx = 0;
  env.q_idx = 50;  // past the end: clamped, never an out-of-bounds read
  EXPECT_EQ(eval(e, env).f, 6.0);
}

TEST(Eval, EvaluatorReportsMissingBindings) {
  Expr e = score() + load("bias", DType::F32, {head()}) * scalar("alpha");
  Evaluator ev(e);
  EvalEnv env;
  env.scalar = [](const std::string&) { return 2.0; };
  try {
    ev.bind(env);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_STREQ(err.what(), "buffer 'bias' is used by the mod but was not given");
  }
  float b1[4] = {1, 2, 3, 4};
  BufferView wrong_rank{DType::F32, {2, 2}, b1};
  env.buffer = [&](const std::string&) { return &wrong_rank; };
  try {
    ev.bind(env);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_STREQ(err.what(), "buffer 'bias' has 2 dimensions but the mod indexes it with 1");
  }
  BufferView ok{DType::F32, {4}, b1};
  env.buffer = [&](const std::string&) { return &ok; };
  ev.bind(env);
  EXPECT_DOUBLE_EQ(ev.run(1.0, 0, 2, 0, 0).f, 1.0 + 3.0 * 2.0);
}

// eval_env (variant.h), the environment bindings/cpu.cc and tools/problem.cc evaluate with: a scalar the mod uses
// but the bindings lack threw std::out_of_range("map::at").
TEST(Eval, EvalEnvNamesAMissingScalar) {
  const Expr m = q_idx() - kv_idx() <= scalar("window", DType::I32);
  ModBindings b;
  EXPECT_EQ(flexattn::test::error_of([&] { eval(m, eval_env(b)); }),
            "scalar 'window' is used by the mod but no value was given");
  b.scalars["window"] = 2;
  EvalEnv env = eval_env(b);
  env.q_idx = 5, env.kv_idx = 3;
  EXPECT_TRUE(eval(m, env).as_bool());
}

// An empty Expr read past an empty node list (values_.back()); print and verify already said so.
TEST(Eval, EmptyExpressionIsAnError) {
  EXPECT_EQ(flexattn::test::error_of([] { eval(Expr(), EvalEnv{}); }), "eval: the expression is empty");
  EXPECT_EQ(flexattn::test::error_of([] { Evaluator ev{Expr()}; }), "eval: the expression is empty");
}
