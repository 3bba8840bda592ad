// Node construction: hash-consing, structural keys (literal values excluded), torch type promotion.
#include <gtest/gtest.h>

#include "flexattn/error.h"
#include "flexattn/expr.h"
#include "flexattn/ir_text.h"
#include "error_of.h"

using flexattn::test::error_of;

using namespace flexattn;
using namespace flexattn::ir;

namespace {
Expr softcap(double c) { return Expr(c) * tanh(score() / Expr(c)); }

}  // namespace

TEST(Expr, HashConsingGivesPointerEquality) {
  Expr a = score() * 2.0 + q_idx();
  Expr b = score() * 2.0 + q_idx();
  EXPECT_EQ(a.get(), b.get());
  Expr c = score() * 3.0 + q_idx();
  EXPECT_NE(a.get(), c.get());
  // -0.0 and +0.0 are different literals (they behave differently under division).
  EXPECT_NE(Expr(0.0).get(), Expr(-0.0).get());
}

TEST(Expr, StructuralKeyExcludesLiteralValues) {
  EXPECT_EQ(structural_key(softcap(20)), structural_key(softcap(30)));
  EXPECT_EQ(structural_hash(softcap(20)), structural_hash(softcap(30)));
  EXPECT_NE(softcap(20).get(), softcap(30).get());
  // Different sharing gives a different kernel: (s+1)*(s+1) has one add, (s+1)*(s+2) two.
  Expr one = (score() + 1.0) * (score() + 1.0);
  Expr two = (score() + 1.0) * (score() + 2.0);
  EXPECT_NE(structural_key(one), structural_key(two));
  // Literal type is part of the structure.
  EXPECT_NE(structural_key(q_idx() + 1), structural_key(q_idx() + 1.0));
  EXPECT_EQ(literal_slots(softcap(20)).size(), 1u);
  EXPECT_EQ(literal_slots(two).size(), 2u);
}

TEST(Expr, TorchPromotionOfZeroDimTensorsAndPythonScalars) {
  EXPECT_EQ((q_idx() + 1).type(), DType::I32);          // int tensor + python int
  EXPECT_EQ((q_idx() + 1.5).type(), DType::F32);        // int tensor + python float -> default float
  EXPECT_EQ((score() + q_idx()).type(), DType::F32);
  EXPECT_EQ((q_idx() / kv_idx()).type(), DType::F32);   // true division
  EXPECT_EQ(floordiv(q_idx(), 2).type(), DType::I32);
  Expr i64 = load("doc", DType::I64, {q_idx()});
  EXPECT_EQ((i64 + q_idx()).type(), DType::I64);
  EXPECT_EQ(((q_idx() >= kv_idx()) * 1).type(), DType::I64);  // bool tensor * python int
  EXPECT_EQ((q_idx() < kv_idx()).type(), DType::Bool);
  EXPECT_EQ(load("bias", DType::BF16, {head(), q_idx() - kv_idx()}).type(), DType::F32);
  EXPECT_FALSE((q_idx() + 1)->weak);
  EXPECT_TRUE((Expr(1) + Expr(2))->weak);
  EXPECT_EQ(exp(q_idx()).type(), DType::F32);
  EXPECT_EQ(floor(q_idx()).get(), q_idx().get());  // floor of an integer is itself
}

TEST(Expr, TypeErrorsNameTheOperation) {
  EXPECT_EQ(error_of([] { !q_idx(); }), "'not': expects a bool operand, got i32 (compare it first, e.g. x != 0)");
  EXPECT_EQ(error_of([] { score() && (q_idx() > 0); }), "'and': expects bool operands, got f32 and bool");
  EXPECT_EQ(error_of([] { load("bias", DType::F32, {score()}); }), "buffer 'bias': index 0 must be an integer, got f32");
  EXPECT_EQ(error_of([] { load("bias", DType::F32, {}); }), "buffer 'bias': a load takes 1 to 4 indices, got 0");
  EXPECT_EQ(error_of([] { cast(score(), DType::BF16); }), "'cast': target must be bool, i32, i64 or f32, got bf16");
  EXPECT_EQ(error_of([] { where(score(), score(), score()); }), "'where': the condition must be bool, got f32");
  EXPECT_EQ(error_of([] { (q_idx() > 0) + (q_idx() > 1); }),
            "'add': not defined for two bools (use && / || or cast first)");
  EXPECT_EQ(error_of([] { -(q_idx() > 0); }), "'neg': not defined for bool (cast to a number first)");
}

TEST(Expr, StructureQueries) {
  Expr e = score() + load("bias", DType::F32, {head(), q_idx() - kv_idx()}) * scalar("alpha") +
           load("doc", DType::I32, {q_idx()});
  auto bufs = buffers(e);
  ASSERT_EQ(bufs.size(), 2u);
  EXPECT_EQ(bufs[0].name, "bias");
  EXPECT_EQ(bufs[0].rank, 2);
  EXPECT_EQ(bufs[1].name, "doc");
  EXPECT_EQ(scalar_names(e), std::vector<std::string>{"alpha"});
  EXPECT_TRUE(depends_on(e, Op::Score));
  EXPECT_FALSE(depends_on(q_idx() >= kv_idx(), Op::Score));
  auto order = topo_order(e);
  EXPECT_EQ(order.back(), e.get());
}

TEST(Expr, DeepChainsDoNotOverflowTheStack) {
  Expr e = score();
  for (int i = 0; i < 300000; ++i) e = e + 1.0;
  EXPECT_EQ(topo_order(e).size(), 300002u);  // score, one shared literal, 300000 adds
  e = Expr();  // releasing the chain must not recurse 300000 levels deep
}

// README: an integer beyond 32 bits (q_idx * 2654435761) widens the arithmetic it meets to 64 bits, as Triton does;
// the C++ builder, the text form and the Python builder (_ir._widened) make the same IR.
TEST(Expr, IntegersBeyond32BitsWidenTheI32OperandTo64Bits) {
  EvalEnv env;
  env.q_idx = 3;
  env.kv_idx = 0;
  const Expr hash = q_idx() * Expr(int64_t(2654435761));
  EXPECT_EQ(hash.type(), DType::I64);
  EXPECT_EQ(eval(hash, env).i, int64_t(7963307283));
  EXPECT_EQ(eval(parse("q_idx * 2654435761"), env).i, int64_t(7963307283));
  EXPECT_TRUE(eval(parse("q_idx - kv_idx <= 4294967296"), env).as_bool());
  EXPECT_TRUE(eval(q_idx() - kv_idx() <= Expr(int64_t(1) << 32), env).as_bool());
  EXPECT_EQ(eval(where(q_idx() > 0, Expr(int64_t(1) << 40), q_idx()), env).i, int64_t(1) << 40);
  EXPECT_EQ(where(q_idx() > 0, q_idx(), Expr(int64_t(-1) << 40)).type(), DType::I64);
  // The IR of the Python builder's test (tests/python/test_tracer_ops.py; its printer binds the shared cast).
  const Expr q64 = Expr(int64_t(1) << 33);
  const Expr m = score() + (q_idx() + Expr(int64_t(1) << 40)) % 7 + q_idx() * Expr(int64_t(2654435761)) % 1000 +
                 (q_idx() < q64);
  EXPECT_EQ(print(m),
            "score + (i64(q_idx) + 1099511627776) % 7 + i64(q_idx) * 2654435761 % 1000 + (i64(q_idx) < 8589934592)");
  // Values that fit keep the kernels' 32-bit index math.
  EXPECT_EQ((q_idx() + Expr(int64_t(2147483647))).type(), DType::I32);
  EXPECT_EQ((q_idx() - Expr(int64_t(-2147483648LL))).type(), DType::I32);
  EXPECT_EQ(eval(q_idx() + Expr(int64_t(2147483648LL)), env).i, int64_t(2147483651LL));
}

// Plain numbers of every integer type (a container's size_t, unsigned, long long) are weak int literals, in the
// builders and in the comparisons with numbers; they were ambiguous between Expr(int), Expr(int64_t), Expr(double)
// and did not compile (this file is the compile test).
TEST(Expr, EveryIntegerTypeIsAPlainNumber) {
  const size_t window = 4;
  const unsigned u = 3;
  const long long ll = 2;
  const short sh = 1;
  const uint64_t big = uint64_t(1) << 40;
  EXPECT_EQ((q_idx() - kv_idx() <= window).get(), (q_idx() - kv_idx() <= Expr(4)).get());
  EXPECT_EQ((q_idx() == window).get(), (q_idx() == Expr(4)).get());
  EXPECT_EQ((q_idx() != u).get(), (q_idx() != Expr(3)).get());
  EXPECT_EQ((q_idx() + ll).get(), (q_idx() + 2).get());
  EXPECT_EQ((q_idx() * sh).get(), (q_idx() * 1).get());
  EXPECT_EQ(Expr(uint8_t(7)).get(), Expr(7).get());
  EXPECT_EQ(Expr(-5LL).get(), Expr(-5).get());
  EXPECT_EQ((q_idx() * big).type(), DType::I64);  // beyond 32 bits: widens, as any int64
  EXPECT_EQ(Expr(uint64_t(INT64_MAX) - 1023).get(), Expr(int64_t(INT64_MAX) - 1023).get());
  EXPECT_EQ(error_of([] { Expr(uint64_t(INT64_MAX) + 1); }),
            "literal: the integer 9223372036854775808 is beyond the int64 range (at most 2^63 - 1)");
  EXPECT_EQ(error_of([] { q_idx() < ~size_t(0); }),
            "literal: the integer 18446744073709551615 is beyond the int64 range (at most 2^63 - 1)");
}

TEST(Expr, IntegersThatADoubleCannotHoldAreRefused) {
  // (before: rounded silently, e.g. a 64-bit bitmask; the parser and the Python builder refuse them)
  const std::string tail = " is not exact in the IR, which keeps literals as doubles (every integer up to 2^53 in "
                           "magnitude is): build it from smaller parts, e.g. (a << 32) | b";
  EXPECT_EQ(error_of([] { q_idx() * 0x5555555555555555ull; }), "literal: the integer 6148914691236517205" + tail);
  EXPECT_EQ(error_of([] { Expr((int64_t(1) << 53) + 1); }), "literal: the integer 9007199254740993" + tail);
  EXPECT_EQ(error_of([] { Expr(INT64_MAX); }), "literal: the integer 9223372036854775807" + tail);
  EXPECT_EQ(error_of([] { Expr(uint64_t(INT64_MAX)); }), "literal: the integer 9223372036854775807" + tail);
  EXPECT_EQ(Expr(int64_t(1) << 53).get()->value, 0x1p53);  // exact ones stay, however large
  EXPECT_EQ(Expr(INT64_MIN).get()->value, -0x1p63);
  EXPECT_EQ(Expr(-(int64_t(1) << 60)).get()->value, -0x1p60);
}
