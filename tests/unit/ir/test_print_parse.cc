// The text form: parse(print(e)) == e (pointer equality of hash-consed nodes) for hand-made and
// random expressions, readable output for common mods, and what each spelling parses to.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "flexattn/error.h"
#include "flexattn/ir_text.h"
#include "unit/ir/random_expr.h"

namespace flexattn::ir {
namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

double from_bits(uint64_t u) {
  double v;
  std::memcpy(&v, &u, 8);
  return v;
}

// Node identity. (`a == b` on two Exprs is ambiguous in C++20: expr.h also declares the
// operator== that builds an Eq node.)
bool same(const Expr& a, const Expr& b) { return a.get() == b.get(); }

void expect_round_trip(const Expr& e) {
  const std::string s = print(e);
  SCOPED_TRACE(s);
  Expr back;
  ASSERT_NO_THROW(back = parse(s));
  EXPECT_TRUE(same(back, e)) << "reprinted as: " << print(back);
}

Expr alpha() { return scalar("alpha"); }
Expr bias(Expr i, Expr j) { return load("bias", DType::F32, {i, j}); }

// ---- readable output for the common case --------------------------------------------------------

TEST(Print, CommonModsReadNaturally) {
  EXPECT_EQ(print(where(q_idx() >= kv_idx(), score(), Expr(-kInf))), "where(q_idx >= kv_idx, score, -inf)");
  EXPECT_EQ(print(Expr(30.0) * tanh(score() / 30.0)), "30.0 * tanh(score / 30.0)");
  EXPECT_EQ(print(score() + load("slope", DType::BF16, {head()}) * (kv_idx() - q_idx())),
            "score + slope{bf16}[h] * (kv_idx - q_idx)");
  Expr doc = binary(Op::Eq, load("doc", DType::I32, {q_idx()}), load("doc", DType::I32, {kv_idx()}));
  EXPECT_EQ(print(doc && (q_idx() >= kv_idx())), "doc{i32}[q_idx] == doc{i32}[kv_idx] && q_idx >= kv_idx");
  EXPECT_EQ(print(score() + bias(head(), q_idx() - 1)), "score + bias[h, q_idx - 1]");
  EXPECT_EQ(print(scalar("offset", DType::I32) + q_idx()), "offset{i32} + q_idx");
  EXPECT_EQ(print(!(q_idx() < kv_idx()) || Expr(false)), "!(q_idx < kv_idx) || false");
}

TEST(Print, ParenthesisesOnlyWherePrecedenceNeedsIt) {
  Expr a = scalar("a"), b = scalar("b_"), c = scalar("c");
  EXPECT_EQ(print((a + b) * c), "(a + b_) * c");
  EXPECT_EQ(print(a + b * c), "a + b_ * c");
  EXPECT_EQ(print(a - b - c), "a - b_ - c");
  EXPECT_EQ(print(a - (b - c)), "a - (b_ - c)");
  EXPECT_EQ(print(a / (b * c)), "a / (b_ * c)");
  EXPECT_EQ(print(-pow(a, Expr(2))), "-a ** 2");
  EXPECT_EQ(print(pow(-a, Expr(2))), "(-a) ** 2");
  EXPECT_EQ(print(pow(a, pow(b, c))), "a ** b_ ** c");
  EXPECT_EQ(print(pow(pow(a, b), c)), "(a ** b_) ** c");
  EXPECT_EQ(print(pow(a, -b)), "a ** -b_");
  EXPECT_EQ(print(pow(Expr(-2.0), a)), "(-2.0) ** a");
  EXPECT_EQ(print(a - Expr(-3)), "a - -3");
  EXPECT_EQ(print(-(-a)), "-(-a)");
  EXPECT_EQ(print(-Expr(3)), "-(3)");  // Neg of a literal; "-3" is the literal -3
  EXPECT_EQ(print(binary(Op::Eq, a < b, b < c)), "(a < b_) == (b_ < c)");
  EXPECT_EQ(print((a < b) && ((b < c) || (c < a))), "a < b_ && (b_ < c || c < a)");
  EXPECT_EQ(print(floordiv(q_idx(), Expr(128)) % Expr(4)), "q_idx // 128 % 4");
  EXPECT_EQ(print(minimum(a, maximum(b, c))), "min(a, max(b_, c))");
  EXPECT_EQ(print(cast(q_idx(), DType::F32)), "f32(q_idx)");
}

// ---- what spellings parse to --------------------------------------------------------------------

TEST(Parse, LiteralsAreWeakLikePythonScalars) {
  EXPECT_TRUE(same(parse("3"), Expr(3)));
  EXPECT_TRUE(same(parse("-3"), Expr(-3)));
  EXPECT_TRUE(same(parse("2.5"), Expr(2.5)));
  EXPECT_TRUE(same(parse(".5"), Expr(0.5)));
  EXPECT_TRUE(same(parse("3e2"), Expr(300.0)));
  EXPECT_TRUE(same(parse("3."), Expr(3.0)));
  EXPECT_TRUE(same(parse("true"), Expr(true)));
  EXPECT_TRUE(same(parse("false"), Expr(false)));
  EXPECT_TRUE(same(parse("inf"), Expr(kInf)));
  EXPECT_TRUE(same(parse("-inf"), Expr(-kInf)));
  EXPECT_TRUE(same(parse("-(3)"), -Expr(3)));
  EXPECT_TRUE(same(parse("- 3"), Expr(-3)));
  EXPECT_TRUE(same(parse("3{i32}"), literal(3, DType::I32, false)));
  EXPECT_TRUE(same(parse("-2.5{f32}"), literal(-2.5, DType::F32, false)));
  EXPECT_TRUE(same(parse("7{i64, weak}"), Expr(7)));
  EXPECT_TRUE(same(parse("1{bool}"), literal(1, DType::Bool, false)));
  EXPECT_TRUE(same(parse("3{int32}"), literal(3, DType::I32, false)));  // torch dtype spellings work too
  Expr n = parse("nan");
  EXPECT_TRUE(std::isnan(n->value) && n->type == DType::F32 && n->weak);
  EXPECT_TRUE(same(parse("-9223372036854775808"), literal(-9223372036854775808.0, DType::I64, true)));
  // -0 is the integer 0 (it kept a signed zero: printed as -0, another node and cache key); -0.0 stays a float -0.0
  EXPECT_TRUE(same(parse("-0"), Expr(0)));
  EXPECT_TRUE(same(parse("-00"), Expr(0)));
  EXPECT_TRUE(same(literal(-0.0, DType::I64, true), Expr(0)) && same(literal(-0.4, DType::I32, false), literal(0, DType::I32, false)));
  EXPECT_TRUE(std::signbit(parse("-0.0")->value));
}

TEST(Parse, OperatorsFollowCPrecedenceWithPythonPower) {
  Expr a = scalar("a"), b = scalar("b_"), c = scalar("c");
  EXPECT_TRUE(same(parse("a + b_ * c"), a + b * c));
  EXPECT_TRUE(same(parse("a - b_ - c"), (a - b) - c));
  EXPECT_TRUE(same(parse("-a ** 2"), -pow(a, Expr(2))));
  EXPECT_TRUE(same(parse("-3 ** 2"), -pow(Expr(3), Expr(2))));  // Python: -9
  EXPECT_TRUE(same(parse("(-3) ** 2"), pow(Expr(-3), Expr(2))));
  EXPECT_TRUE(same(parse("2 ** 3 ** 2"), pow(Expr(2), pow(Expr(3), Expr(2)))));
  EXPECT_TRUE(same(parse("a ** -b_"), pow(a, -b)));
  EXPECT_TRUE(same(parse("a // b_ % c"), mod(floordiv(a, b), c)));
  Expr q = q_idx(), kv = kv_idx();
  EXPECT_TRUE(same(parse("q >= kv & b == 0"), ((q >= kv) && binary(Op::Eq, batch(), Expr(0)))));
  EXPECT_TRUE(same(parse("q >= kv and h == 0 or not (b == 1)"), (((q >= kv) && binary(Op::Eq, head(), Expr(0))) || !binary(Op::Eq, batch(), Expr(1)))));
  EXPECT_TRUE(same(parse("q < kv | q > kv + 3"), ((q < kv) || (q > kv + Expr(3)))));
  EXPECT_TRUE(same(parse("~(q < kv)"), !(q < kv)));
  // '~' on an integer is bitwise, as torch's and the C++ builder's operator~ (it was an error: "'not' expects a bool")
  EXPECT_TRUE(same(parse("~q_idx"), ~q_idx()));
  EXPECT_TRUE(same(parse("~q_idx"), bitwise_not(q_idx())));
  EXPECT_TRUE(same(parse("!!(q < kv)"), !!(q < kv)));
  Expr t = q < kv;
  EXPECT_TRUE(same(parse("q < kv ? a : b_ < c ? b_ : c"), where(t, a, where(b < c, b, c))));
  EXPECT_TRUE(same(parse("(q < kv ? a : b_) + 1"), where(t, a, b) + Expr(1)));
}

TEST(Parse, NamesFunctionsAndCasts) {
  EXPECT_TRUE(same(parse("score + b + h + q_idx + kv_idx"), score() + batch() + head() + q_idx() + kv_idx()));
  EXPECT_TRUE(same(parse("q - kv"), q_idx() - kv_idx()));
  EXPECT_TRUE(same(parse("min(q, kv) + minimum(q, kv) + max(q, kv) + maximum(q, kv)"), minimum(q_idx(), kv_idx()) + minimum(q_idx(), kv_idx()) + maximum(q_idx(), kv_idx()) +
                  maximum(q_idx(), kv_idx())));
  EXPECT_TRUE(same(parse("pow(score, 2)"), pow(score(), Expr(2))));
  EXPECT_TRUE(same(parse("neg(score)"), -score()));
  EXPECT_TRUE(same(parse("float(q) + f32(kv)"), cast(q_idx(), DType::F32) + cast(kv_idx(), DType::F32)));
  EXPECT_TRUE(same(parse("int(score)"), cast(score(), DType::I32)));
  EXPECT_TRUE(same(parse("i64(q)"), cast(q_idx(), DType::I64)));
  EXPECT_TRUE(same(parse("bool(q)"), cast(q_idx(), DType::Bool)));
  EXPECT_TRUE(same(parse("exp(score) + exp2(score) + log(score) + log2(score)"), exp(score()) + exp2(score()) + log(score()) + log2(score())));
  EXPECT_TRUE(same(parse("sqrt(abs(score)) * rsqrt(2.0) + sigmoid(sin(score)) - cos(floor(score)) / ceil(score)"), sqrt(abs(score())) * rsqrt(Expr(2.0)) + sigmoid(sin(score())) - cos(floor(score())) / ceil(score())));
  EXPECT_TRUE(same(parse("where(q >= kv, score, -inf)"), where(q_idx() >= kv_idx(), score(), Expr(-kInf))));
  // Names that are not inputs are runtime scalars (f32 unless declared), or buffers when indexed.
  EXPECT_TRUE(same(parse("alpha * score"), scalar("alpha") * score()));
  EXPECT_TRUE(same(parse("exp * 2.0"), scalar("exp") * Expr(2.0)));
  EXPECT_TRUE(same(parse("bias[h, q]"), bias(head(), q_idx())));
  ParseOptions opt;
  opt.buffer_dtypes["doc"] = DType::I32;
  opt.scalar_types["window"] = DType::I64;
  EXPECT_TRUE(same(parse("doc[q] == doc[kv] && q - kv < window", opt), ((binary(Op::Eq, load("doc", DType::I32, {q_idx()}), load("doc", DType::I32, {kv_idx()}))) &&
               (q_idx() - kv_idx() < scalar("window", DType::I64)))));
  EXPECT_TRUE(same(parse("doc{i32}[q] + window{i64}"), load("doc", DType::I32, {q_idx()}) + scalar("window", DType::I64)));
  EXPECT_TRUE(same(parse("doc{i32}[q]", opt), load("doc", DType::I32, {q_idx()})));  // agreeing annotation
}

TEST(Parse, CommentsLinesAndBindings) {
  const std::string src =
      "# softcap with a shared subexpression\n"
      "t = tanh(score / 20.0);   # bound once\n"
      "\n"
      "20.0 * t + t * t;\n";
  Expr t = tanh(score() / Expr(20.0));
  EXPECT_TRUE(same(parse(src), Expr(20.0) * t + t * t));
  // A binding shadows a scalar of the same name; an annotated name is always the scalar.
  EXPECT_TRUE(same(parse("x = q + 1; x * x{i32}"), (q_idx() + Expr(1)) * scalar("x", DType::I32)));
}

TEST(Parse, SameTextSameNode) {
  EXPECT_TRUE(same(parse("score * 2 + bias[h, q]"), parse("score*2+bias[ h ,q ]")));
}

// ---- round trip ---------------------------------------------------------------------------------

std::vector<Expr> literal_corpus() {
  std::vector<Expr> v;
  const double floats[] = {0.0,  -0.0, 1.0,    -1.0, 0.5,   3.0,  1e-45, -1e-45, 5e-324, 1.7976931348623157e308,
                           kInf, -kInf, kNaN, -kNaN, 0.1 + 0.2, 1.0 / 3.0, 123456789.123456789, 1e20, -2.5e-7,
                           2.2250738585072014e-308, 0.30000000000000004, 16777217.0, 1e300};
  for (double f : floats) {
    v.push_back(Expr(f));
    v.push_back(literal(f, DType::F32, false));
  }
  const double ints[] = {0, 1, -1, 127, 2147483647, -2147483648.0, 4294967296.0, 9007199254740993.0,
                         9223372036854775808.0 - 1024.0, -9223372036854775808.0};
  for (double i : ints) {
    for (bool weak : {true, false}) {
      v.push_back(literal(i, DType::I64, weak));
      v.push_back(literal(i, DType::I32, weak));
    }
  }
  for (bool weak : {true, false})
    for (double b : {0.0, 1.0}) v.push_back(literal(b, DType::Bool, weak));
  v.push_back(make_node(Op::Literal, DType::I64, true, {}, -0.0));             // literal() makes it 0: raw
  v.push_back(make_node(Op::Literal, DType::I32, false, {}, 2.5));             // not an i32 value
  v.push_back(make_node(Op::Literal, DType::Bool, true, {}, 2.0));             // not a bool value
  v.push_back(make_node(Op::Literal, DType::I64, true, {}, 1e30));             // beyond i64
  v.push_back(make_node(Op::Literal, DType::F32, true, {}, from_bits(0x7ff0000000000001ull)));  // NaN payload
  v.push_back(make_node(Op::Literal, DType::F32, false, {}, from_bits(0xfff8000000000000ull)));  // -nan
  v.push_back(make_node(Op::Literal, DType::F64, false, {}, 1.5));             // not a value type
  return v;
}

TEST(RoundTrip, EveryLiteralKeepsTypeWeaknessAndBits) {
  for (const Expr& e : literal_corpus()) {
    expect_round_trip(e);
    expect_round_trip(make_node(Op::Neg, e.type(), e->weak, {e}));  // -(literal)
    expect_round_trip(make_node(Op::Pow, DType::F32, false, {e, score()}));  // literal as a ** base
  }
}

TEST(RoundTrip, LiteralSpellings) {
  EXPECT_EQ(print(Expr(3)), "3");
  EXPECT_EQ(print(Expr(-3)), "-3");
  EXPECT_EQ(print(Expr(3.0)), "3.0");
  EXPECT_EQ(print(Expr(-0.0)), "-0.0");
  EXPECT_EQ(print(Expr(0.1 + 0.2)), "0.30000000000000004");
  EXPECT_EQ(print(Expr(1e-45)), "1e-45");
  EXPECT_EQ(print(Expr(kNaN)), "nan");
  EXPECT_EQ(print(literal(-kInf, DType::F32, false)), "-inf{f32}");
  EXPECT_EQ(print(literal(2.5, DType::F32, false)), "2.5{f32}");
  EXPECT_EQ(print(literal(3, DType::I32, false)), "3{i32}");
  EXPECT_EQ(print(literal(3, DType::I32, true)), "3{i32, weak}");
  EXPECT_EQ(print(literal(3, DType::I64, false)), "3{i64}");
  EXPECT_EQ(print(literal(1, DType::Bool, false)), "true{bool}");
  EXPECT_EQ(print(make_node(Op::Literal, DType::F32, true, {}, from_bits(0x7ff0000000000001ull))),
            "@literal{f32, weak}(0x7ff0000000000001)");
}

// One expression per op of ir_nodes.def (and the spellings that differ from the builders).
std::vector<Expr> op_corpus() {
  Expr s = score(), q = q_idx(), kv = kv_idx(), t = q < kv;
  Expr i64v = scalar("window", DType::I64), flag = scalar("causal", DType::Bool);
  return {
      s, batch(), head(), q, kv, Expr(2.0), alpha(), bias(head(), q - kv),
      load("tab", DType::F16, {batch(), head(), q, kv}), load("doc", DType::I32, {q}),
      load("pos", DType::I64, {head(), kv}), load("blk", DType::Bool, {q}),
      -s, -q, abs(s), abs(i64v), exp(s), exp2(q), log(s), log2(s), sqrt(s), rsqrt(s), tanh(s), tanh_approx(s), sigmoid(s), tan(s), erf(s),
      sin(s), cos(s), floor(s), ceil(s + 0.5), detach(s * 2.0), !t, !flag, cast(s, DType::I32), cast(q, DType::I64),
      cast(q, DType::Bool), cast(t, DType::F32), cast(Expr(3), DType::I64), cast(Expr(2.5), DType::F32),
      s + q, q + i64v, s - 1, q - Expr(1), s * alpha(), q * 2, s / 3, q / kv, floordiv(s, 2.0),
      floordiv(q, Expr(128)), mod(s, 1.5), mod(q - kv, Expr(7)), minimum(s, 0.0), maximum(q, kv),
      minimum(t, flag), pow(s, 2), pow(q, Expr(3)), pow(Expr(2.0), s), binary(Op::Eq, q, kv), s != 0.0, q < kv, s <= 1.0,
      q > Expr(3), s >= alpha(), t && flag, t || (kv > q), where(t, s, Expr(-kInf)), where(t, q, kv),
      bitwise_and(q, Expr(255)), bitwise_or(q, i64v), bitwise_left_shift(kv, Expr(3)), bitwise_right_shift(q - kv, Expr(1)),
      where(flag, Expr(1), Expr(2.5)), where(t, t, flag),
      // ops nested under other ops, every precedence pairing
      -(s + 1.0) * pow(-s, 2) - pow(s, -s) / (alpha() - s), !(t && flag) || !t,
      binary(Op::Ne, binary(Op::Eq, q < kv, flag), s > 0.0), where(where(t, flag, t), minimum(s, alpha()), cast(q * kv, DType::F32)),
  };
}

// Nodes only make_node produces: the printer must fall back to the raw `@op` spelling.
std::vector<Expr> raw_corpus() {
  Expr s = score(), q = q_idx();
  return {
      make_node(Op::Cast, DType::F32, false, {s}),                 // cast to its own type
      make_node(Op::Floor, DType::I32, false, {q}),                // floor of an int
      make_node(Op::Neg, DType::F32, true, {s}),                   // wrong weakness
      make_node(Op::Add, DType::I32, false, {s, q}),               // wrong promotion
      make_node(Op::Not, DType::Bool, false, {s}),                 // ill-typed
      make_node(Op::Score, DType::I64, false, {}),                 // input with another type
      make_node(Op::Select, DType::F32, false, {s, s, s}),         // non-bool condition
      make_node(Op::Add, DType::F32, false, {s, s}, 0.0, "tag"),   // a stray name
      make_node(Op::Score, DType::F32, false, {}, 0.0, "we\"ird\n"),
      make_node(Op::Scalar, DType::F32, false, {}, 0.0, "score"),  // scalar named like an input
      make_node(Op::Scalar, DType::I32, true, {}, 0.0, "a b"),
      make_node(Op::Scalar, DType::F32, false, {}, 0.0, ""),
      make_node(Op::Load, DType::F32, false, {}, 0.0, "bias"),     // no index
      make_node(Op::Load, DType::F32, false, {q, q, q, q, q}, 0.0, "bias", DType::BF16),
      make_node(Op::Load, DType::I32, false, {s}, 0.0, "kv", DType::F64),
      make_node(Op::Exp, DType::F32, false, {make_node(Op::Cast, DType::I32, false, {q})}) + 1.0,
  };
}

TEST(RoundTrip, EveryOpOfTheNodeList) {
  std::set<Op> seen;
  for (const Expr& e : op_corpus()) {
    expect_round_trip(e);
    EXPECT_EQ(print(e).find('@'), std::string::npos) << print(e);
    for (const Node* n : topo_order(e)) seen.insert(n->op);
  }
  EXPECT_EQ(int(seen.size()), kNumOps);
}

TEST(RoundTrip, NodesTheBuildersWouldNotMake) {
  for (const Expr& e : raw_corpus()) expect_round_trip(e);
  EXPECT_EQ(print(raw_corpus()[0]), "@cast{f32}(score)");
  EXPECT_EQ(print(raw_corpus()[7]), "@add{f32}(\"tag\", score, score)");
  EXPECT_EQ(print(raw_corpus()[13]), "@load{f32}(bias{bf16}, q_idx, q_idx, q_idx, q_idx, q_idx)");
}

TEST(Print, EmptyExpressionIsAnError) {
  try {
    print(Expr());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "print: the expression is empty");
  }
}

TEST(RoundTrip, SharedSubexpressionsAreBoundOnlyWhenLong) {
  Expr t = tanh(score() / 30.0);
  EXPECT_EQ(print(t * t), "tanh(score / 30.0) * tanh(score / 30.0)");
  Expr u = bias(head(), q_idx() - kv_idx()) * exp(score() / scalar("temperature")) + 1.0;
  EXPECT_EQ(print(u * u - u), "t0 = bias[h, q_idx - kv_idx] * exp(score / temperature) + 1.0;\nt0 * t0 - t0");
  // A binding name never captures a scalar of the same name.
  Expr v = u + scalar("t0");
  expect_round_trip(v * v);
  EXPECT_EQ(print(v * v).substr(0, 5), "t1 = ");
}

TEST(RoundTrip, ExponentialDagPrintsInLinearSize) {
  Expr x = score();
  for (int i = 0; i < 200; ++i) x = x * x + Expr(double(i));  // 2^200 paths from the root
  const std::string s = print(x);
  EXPECT_LT(s.size(), 200u * 80u);
  expect_round_trip(x);
}

TEST(RoundTrip, DeepChainsStayWithinTheParserNestingLimit) {
  Expr left = score(), right = score();
  for (int i = 0; i < 5000; ++i) {
    left = left + Expr(double(i));
    right = Expr(double(i)) - right;  // right-nested: prints with parentheses
  }
  expect_round_trip(left);
  expect_round_trip(right);
  // The chains that cost the parser most nesting per level: -(-(...)), where(c, where(...)), a ** (b ** ...).
  Expr neg_chain = score(), where_chain = score(), pow_chain = score();
  for (int i = 0; i < 2000; ++i) {
    neg_chain = make_node(Op::Neg, DType::F32, false, {neg_chain});
    where_chain = where(q_idx() < Expr(i), where_chain, -where_chain);
    pow_chain = pow(Expr(1.0 + i), pow_chain);
  }
  expect_round_trip(neg_chain);
  expect_round_trip(where_chain);
  expect_round_trip(pow_chain);
  expect_round_trip(where(left > right, left, right));
}

TEST(RoundTrip, RandomExpressions) {
  testing::TestWorld world;
  int n = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    testing::GenOptions go;
    go.max_depth = 2 + int(seed % 5);
    testing::RandomExprGen gen(world, seed, go);
    for (int i = 0; i < 100; ++i, ++n) {
      const Expr e = i % 3 == 0 ? gen.mask_mod() : i % 3 == 1 ? gen.score_mod() : gen.any(go.max_depth);
      const std::string s = print(e);
      Expr back;
      ASSERT_NO_THROW(back = parse(s)) << s;
      ASSERT_TRUE(same(back, e)) << "seed " << seed << " #" << i << ": " << s << "\nreprinted: " << print(back);
      ASSERT_EQ(s.find('@'), std::string::npos) << "builder-made nodes need no raw spelling: " << s;
    }
  }
  EXPECT_EQ(n, 4000);
}

// `&` and `|` follow torch: bitwise on integers, logical on bools (at the logical operators' precedence); the
// bitwise nodes print as their functions, so the text reads back to the same node.
TEST(Parse, AmpersandAndBarAreBitwiseOnIntegers) {
  EXPECT_TRUE(parse("(q_idx & 1) == 0").same(binary(Op::Eq, bitwise_and(q_idx(), Expr(1)), Expr(0))));
  EXPECT_TRUE(parse("(q_idx | kv_idx) != 0").same(binary(Op::Ne, bitwise_or(q_idx(), kv_idx()), Expr(0))));
  EXPECT_TRUE(parse("q_idx > 1 & kv_idx > 2").same((q_idx() > 1) && (kv_idx() > Expr(2))));
  EXPECT_TRUE(parse("q_idx > 1 | kv_idx > 2").same((q_idx() > 1) || (kv_idx() > Expr(2))));
  EXPECT_TRUE(parse("bitwise_right_shift(q, 5) == bitwise_right_shift(kv, 5)")
                  .same(binary(Op::Eq, bitwise_right_shift(q_idx(), Expr(5)), bitwise_right_shift(kv_idx(), Expr(5)))));
  EXPECT_EQ(print(parse("(q_idx & 3) == bitwise_left_shift(kv_idx, 1)")),
            "bitwise_and(q_idx, 3) == bitwise_left_shift(kv_idx, 1)");
  // Python reads `q_idx & 1 == 0` as (q_idx & 1) == 0, this grammar as q_idx & (1 == 0): refused, not guessed.
  for (const char* text : {"q_idx & 1 == 0", "kv_idx > 2 | q_idx"}) {
    try {
      parse(text);
      ADD_FAILURE() << text << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("between a bool and an integer: the text form gives it the precedence of "
                                           "'&&' / '||', so parenthesize the bitwise part, e.g. (q_idx & 1) == 0"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace flexattn::ir
