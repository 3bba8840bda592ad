// The verifier accepts everything the builders make and names the mod, the problem and the
// offending node for everything else.
#include <gtest/gtest.h>

#include <limits>

#include "flexattn/error.h"
#include "flexattn/ir_passes.h"
#include "flexattn/ir_text.h"
#include "unit/ir/random_expr.h"
#include "error_of.h"

using flexattn::test::error_of;

namespace flexattn::ir {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

std::string verify_error(const Expr& e, const std::string& what = "score_mod") {
  return error_of([&] { verify(e, what); });
}

TEST(Verify, AcceptsWhatTheBuildersMake) {
  Expr s = score(), q = q_idx(), kv = kv_idx();
  Expr doc = binary(Op::Eq, load("doc", DType::I32, {q}), load("doc", DType::I32, {kv}));
  const Expr good[] = {
      s, Expr(30.0) * tanh(s / 30.0), where(q >= kv, s, Expr(-kInf)),
      s + load("slope", DType::BF16, {head()}) * cast(kv - q, DType::F32),
      doc && (q >= kv) && !scalar("off", DType::Bool), floordiv(q, Expr(128)) % Expr(4),
      pow(s, 2) + floor(s) + ceil(s) + abs(q) + minimum(q, kv) + maximum(s, 0.5),
      load("tab", DType::F16, {batch(), head(), q, kv}) + load("pos", DType::I64, {head(), kv}) * 1.5,
      where(q < kv, Expr(1), Expr(2.5)), cast(load("blk", DType::Bool, {q}), DType::I64) / q,
      literal(-kInf, DType::F32, false), exp(Expr(true)),
  };
  for (const Expr& e : good) {
    EXPECT_EQ(verify_error(e), "(no error)") << print(e);
  }
  EXPECT_NO_THROW(verify_score_mod(good[1]));
  EXPECT_NO_THROW(verify_score_mod(q - kv));  // integer results are numbers too
  EXPECT_NO_THROW(verify_mask_mod(doc && (q >= kv)));
}

TEST(Verify, AcceptsRandomExpressions) {
  testing::TestWorld world;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    testing::RandomExprGen gen(world, seed);
    for (int i = 0; i < 50; ++i) {
      Expr sm = gen.score_mod(), mm = gen.mask_mod();
      ASSERT_NO_THROW(verify_score_mod(sm)) << print(sm);
      ASSERT_NO_THROW(verify_mask_mod(mm)) << print(mm);
    }
  }
}

TEST(Verify, OperandTypes) {
  Expr s = score(), q = q_idx();
  EXPECT_EQ(verify_error(make_node(Op::Not, DType::Bool, false, {s})),
            "score_mod: 'not' needs a bool operand, got f32, at: @not{bool}(score)");
  EXPECT_EQ(verify_error(make_node(Op::And, DType::Bool, false, {q < q_idx(), q}), "mask_mod"),
            "mask_mod: 'and' needs bool operands, got bool and i32, at: @and{bool}(q_idx < q_idx, q_idx)");
  EXPECT_EQ(verify_error(make_node(Op::Neg, DType::Bool, false, {Expr(true)})),
            "score_mod: 'neg' needs a number, got bool, at: @neg{bool}(true)");
  EXPECT_EQ(verify_error(make_node(Op::Abs, DType::F32, false, {q})),
            "score_mod: 'abs' must keep its operand's type i32, at: @abs{f32}(q_idx)");
  EXPECT_EQ(verify_error(make_node(Op::Tanh, DType::I32, false, {q})),
            "score_mod: 'tanh' must have type f32, at: @tanh{i32}(q_idx)");
  EXPECT_EQ(verify_error(make_node(Op::Select, DType::F32, false, {s, s, s})),
            "score_mod: 'where' needs a bool condition, got f32, at: @where{f32}(score, score, score)");
  EXPECT_EQ(verify_error(make_node(Op::Select, DType::I32, false, {q < q, s, q})),
            "score_mod: 'where' of f32 and i32 must have type f32, has i32, at: @where{i32}(q_idx < q_idx, score, q_idx)");
  EXPECT_EQ(verify_error(make_node(Op::Add, DType::I32, false, {s, q})),
            "score_mod: 'add' of f32 and i32 must have type f32, has i32, at: @add{i32}(score, q_idx)");
  EXPECT_EQ(verify_error(make_node(Op::Sub, DType::Bool, false, {Expr(true), Expr(false)})),
            "score_mod: 'sub' is not defined for two bools, at: @sub{bool}(true, false)");
  EXPECT_EQ(verify_error(make_node(Op::Div, DType::F32, false, {Expr(true), Expr(false)})),
            "score_mod: 'div' is not defined for two bools, at: @div{f32}(true, false)");
  EXPECT_EQ(verify_error(make_node(Op::Div, DType::I32, false, {q, q})),
            "score_mod: 'div' must have type f32 (true division), at: @div{i32}(q_idx, q_idx)");
  EXPECT_EQ(verify_error(make_node(Op::Lt, DType::I32, false, {q, q})),
            "score_mod: 'lt' must have type bool, at: @lt{i32}(q_idx, q_idx)");
  // FloorDiv and Mod are defined on ints and floats alike.
  EXPECT_EQ(verify_error(make_node(Op::FloorDiv, DType::F32, false, {s, s}) + make_node(Op::Mod, DType::I32, false, {q, q})),
            "(no error)");
}

TEST(Verify, InputsAndLiterals) {
  EXPECT_EQ(verify_error(make_node(Op::QIdx, DType::I64, false, {})), "score_mod: 'q_idx' must have type i32, at: @q_idx{i64}()");
  EXPECT_EQ(verify_error(make_node(Op::Score, DType::I32, false, {})), "score_mod: 'score' must have type f32, at: @score{i32}()");
  EXPECT_EQ(verify_error(make_node(Op::Literal, DType::I32, false, {}, 3e9)),
            "score_mod: an i32 literal must be an integer in the range of i32, at: @literal{i32}(0x41e65a0bc0000000)");
  EXPECT_EQ(verify_error(make_node(Op::Literal, DType::I64, true, {}, 0.5)),
            "score_mod: an i64 literal must be an integer in the range of i64, at: @literal{i64, weak}(0x3fe0000000000000)");
  EXPECT_EQ(verify_error(make_node(Op::Literal, DType::Bool, true, {}, 2.0)),
            "score_mod: a bool literal must be 0 or 1, at: @literal{bool, weak}(0x4000000000000000)");
  // INT64_MAX rounds to 2^63 as a double (the ModParams slot type), which is not an i64: refused when built.
  try {
    Expr(int64_t(9223372036854775807));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "literal: the integer 9223372036854775807 is not exact in the IR, which keeps literals as "
                           "doubles (every integer up to 2^53 in magnitude is): build it from smaller parts, e.g. "
                           "(a << 32) | b");
  }
  EXPECT_NE(verify_error(make_node(Op::Literal, DType::I64, true, {}, 9223372036854775808.0)), "(no error)");
}

TEST(Verify, NoF64Values) {
  Expr s = score();
  EXPECT_EQ(verify_error(make_node(Op::Add, DType::F64, false, {s, s})),
            "score_mod: 'add' has type f64 (values are bool, i32, i64 or f32), at: @add{f64}(score, score)");
  EXPECT_EQ(verify_error(make_node(Op::Literal, DType::F64, true, {}, 1.5) + s),
            "score_mod: 'literal' has type f64 (values are bool, i32, i64 or f32), at: "
            "@literal{f64, weak}(0x3ff8000000000000)");
  EXPECT_EQ(verify_error(make_node(Op::Load, DType::F32, false, {q_idx()}, 0.0, "bias", DType::F64)),
            "score_mod: buffer 'bias' is f64 (buffers may not be f64), at: @load{f32}(bias{f64}, q_idx)");
}

TEST(Verify, Buffers) {
  Expr h = head(), q = q_idx();
  EXPECT_EQ(verify_error(load("bias", DType::F32, {h}) + load("bias", DType::F32, {h, q})),
            "score_mod: buffer 'bias' is loaded with 2 indices here and 1 index elsewhere, at: bias[h, q_idx]");
  EXPECT_EQ(verify_error(load("bias", DType::F32, {h}) + load("bias", DType::BF16, {q})),
            "score_mod: buffer 'bias' is loaded as bf16 here and as f32 elsewhere, at: bias{bf16}[q_idx]");
  EXPECT_EQ(verify_error(make_node(Op::Load, DType::F32, false, {}, 0.0, "bias")),
            "score_mod: buffer 'bias' is loaded with 0 indices (1 to 4 are allowed), at: @load{f32}(bias{f32})");
  EXPECT_EQ(verify_error(make_node(Op::Load, DType::F32, false, {h, h, h, h, h}, 0.0, "bias")),
            "score_mod: buffer 'bias' is loaded with 5 indices (1 to 4 are allowed), at: @load{f32}(bias{f32}, h, h, h, h, h)");
  EXPECT_EQ(verify_error(make_node(Op::Load, DType::F32, false, {score()}, 0.0, "bias")),
            "score_mod: index 0 of buffer 'bias' must be an integer, got f32, at: @load{f32}(bias{f32}, score)");
  EXPECT_EQ(verify_error(make_node(Op::Load, DType::F32, false, {h}, 0.0, "doc", DType::I32)),
            "score_mod: a load from i32 buffer 'doc' must have type i32, at: @load{f32}(doc{i32}, h)");
  EXPECT_EQ(verify_error(make_node(Op::Load, DType::F32, false, {h}, 0.0, "")),
            "score_mod: a load must name its buffer, at: @load{f32}(\"\"{f32}, h)");
}

TEST(Verify, Scalars) {
  EXPECT_EQ(verify_error(scalar("alpha") + cast(scalar("alpha", DType::I32), DType::F32)),
            "score_mod: scalar 'alpha' has type i32 here and f32 elsewhere, at: alpha{i32}");
  EXPECT_EQ(verify_error(make_node(Op::Scalar, DType::F32, false, {}, 0.0, "")),
            "score_mod: a scalar must have a name, at: @scalar{f32}(\"\")");
}

TEST(Verify, ModResults) {
  Expr q = q_idx(), kv = kv_idx();
  EXPECT_EQ(error_of([&] { verify_score_mod(q >= kv); }),
            "score_mod must return a number (f32, i32 or i64), got bool: q_idx >= kv_idx");
  EXPECT_EQ(error_of([&] { verify_mask_mod(score()); }), "mask_mod must return bool, got f32: score");
  EXPECT_EQ(error_of([&] { verify_mask_mod((q >= kv) && (score() > 0.0)); }),
            "mask_mod must not use 'score': q_idx >= kv_idx && score > 0.0");
  EXPECT_EQ(error_of([&] { verify_mask_mod(make_node(Op::Not, DType::Bool, false, {q})); }),
            "mask_mod: 'not' needs a bool operand, got i32, at: @not{bool}(q_idx)");
  EXPECT_EQ(error_of([&] { verify_score_mod(Expr()); }), "score_mod: the expression is empty");
}

TEST(Verify, LongNodesAreCutInMessages) {
  Expr e = score();
  for (int i = 0; i < 100; ++i) {
    std::string name = "s";
    name += std::to_string(i);
    e = e + scalar(name);
  }
  const std::string msg = verify_error(e * make_node(Op::Not, DType::Bool, false, {e}));
  EXPECT_EQ(msg.substr(0, 67), "score_mod: 'not' needs a bool operand, got f32, at: @not{bool}(t1 +");
  EXPECT_EQ(msg.substr(msg.size() - 4), " ...");
  EXPECT_LT(msg.size(), 260u);
}

}  // namespace
}  // namespace flexattn::ir
