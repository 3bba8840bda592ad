// kernels/common/mod_ops.cuh compiled as host C++: the device definitions of // and % must give the
// interpreter's values (src/ir/eval.cc is the definition), on both the 32-bit and 64-bit paths.
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <random>
#include <vector>

#include "common/mod_ops.cuh"
#include "flexattn/error.h"
#include "flexattn/expr.h"
#include "flexattn/ir_text.h"

using namespace flexattn;
using namespace flexattn::ir;

namespace {
int64_t interp(Expr e) {
  EvalEnv env;
  return eval(e, env).i;
}
}  // namespace

TEST(ModOpsHost, IntegerFloorDivisionAndModuloMatchTheInterpreter) {
  const std::vector<long long> values = {0, 1, -1, 2, -2, 7, -7, 255, 256, -256, 257, 1000, -1000,
                                         INT_MAX, INT_MIN, (long long)INT_MAX + 1, (long long)INT_MIN - 1,
                                         1LL << 40, -(1LL << 40), 1LL << 52, -(1LL << 52)};
  for (long long a : values) {
    for (long long b : values) {
      // Literals are stored as doubles: every value above is exact in one.
      const Expr ea = cast(Expr(0), DType::I64) + Expr(int64_t(a)), eb = cast(Expr(0), DType::I64) + Expr(int64_t(b));
      EXPECT_EQ(fa_floordiv(a, b), interp(floordiv(ea, eb))) << a << " // " << b;
      EXPECT_EQ(fa_mod(a, b), interp(mod(ea, eb))) << a << " % " << b;
      if (a == (int)a && b == (int)b) {
        const Expr ia = q_idx() * 0 + Expr(int(a)), ib = q_idx() * 0 + Expr(int(b));  // strong i32
        EXPECT_EQ(fa_floordiv(int(a), int(b)), interp(floordiv(ia, ib))) << a << " // " << b << " (i32)";
        EXPECT_EQ(fa_mod(int(a), int(b)), interp(mod(ia, ib))) << a << " % " << b << " (i32)";
      }
    }
  }
}

TEST(ModOpsHost, ThirtyTwoBitPathMatchesTheSixtyFourBitDefinition) {
  // Random and edge pairs: the i32 ops (used for indices and by the i64 ops' fast path) against the
  // 64-bit generic definition, itself pinned to the interpreter above.
  std::mt19937 rng(7);
  std::vector<int> divisors = {1, -1, 2, -2, 3, -3, 7, 10, 64, 127, 128, 129, 255, 256, 257, 1000, 4095, 4097,
                               65535, 65537, 1 << 21, (1 << 22) - 1, 1 << 22, 1 << 30, INT_MAX, INT_MIN, -1000003};
  std::uniform_int_distribution<int> any(INT_MIN, INT_MAX);
  for (int i = 0; i < 2000; ++i) divisors.push_back(any(rng) >> (i % 31));
  std::uniform_int_distribution<int> small(-(1 << 22) + 1, (1 << 22) - 1);
  long long checked = 0;
  for (int b : divisors) {
    if (b == 0) continue;
    const int minus_b = int(0u - unsigned(b));  // -b, wrapping for INT_MIN (negating it is undefined)
    std::vector<int> as = {0, 1, -1, b, minus_b, (1 << 22) - 1, -(1 << 22) + 1, (1 << 22), INT_MAX, INT_MIN};
    for (int k = -3; k <= 3; ++k) as.push_back(int(fa_mul(b, 1000 + k)));  // around exact multiples
    for (int k = 0; k < 400; ++k) as.push_back(small(rng));
    for (int a : as) {
      // i32 results wrap (INT_MIN // -1), as the interpreter's i32 nodes do.
      ASSERT_EQ(fa_floordiv(a, b), int(fa_floordiv<long long>(a, b))) << a << " // " << b;
      ASSERT_EQ(fa_mod(a, b), int(fa_mod<long long>(a, b))) << a << " % " << b;
      ++checked;
    }
  }
  EXPECT_GT(checked, 800000);
}

TEST(ModOpsHost, ThirtyTwoBitClampMatchesTheSixtyFourBitOne) {
  // fa_clamp_index32 (i32 gather indices; the host refuses buffer dimensions >= 2^31) against
  // fa_clamp_index, itself the interpreter's clamp_index rule: wrap once if negative, then clamp.
  std::mt19937 rng(11);
  std::vector<long long> sizes = {1, 2, 3, 7, 128, 4095, 16383, 1 << 20, INT_MAX - 1, INT_MAX};
  std::uniform_int_distribution<long long> any_size(1, INT_MAX);
  for (int i = 0; i < 200; ++i) sizes.push_back(any_size(rng) >> (i % 31));
  std::uniform_int_distribution<int> any(INT_MIN, INT_MAX);
  for (long long size : sizes) {
    if (size < 1) continue;
    const int s = int(size);
    std::vector<int> idx = {0, 1, -1, s - 1, s, -s, -s + 1, -s - 1, INT_MAX, INT_MIN, INT_MIN + 1, INT_MAX - 1};
    if (s < INT_MAX) idx.push_back(s + 1);
    for (int k = 0; k < 300; ++k) idx.push_back(any(rng) >> (k % 32));
    for (int i : idx) {
      ASSERT_EQ((long long)fa_clamp_index32(i, size), fa_clamp_index((long long)i, size)) << i << " in " << size;
      // Positions (b, h, q_idx, kv_idx) are never negative: there the upper clamp alone is the same rule.
      if (i >= 0) ASSERT_EQ(fa_clamp_position32(i, size), fa_clamp_index32(i, size)) << i << " in " << size;
      else ASSERT_EQ((long long)fa_clamp_position32(i, size), size - 1) << i << " in " << size << ": stays inside";
    }
  }
}

// The bitwise nodes: the device helpers (and C++'s & and | that codegen prints) against the interpreter, ATen's
// shift edges included (a count outside [0, bits): 0 to the left, the sign to the right), i32 and i64.
TEST(ModOpsHost, BitwiseOperationsMatchTheInterpreter) {
  const std::vector<long long> values = {0, 1, -1, 2, 3, 7, -8, 255, 0x0000FFFF, 0x00FF00FF, INT_MAX, INT_MIN,
                                         (long long)INT_MAX + 1, 1LL << 40, -(1LL << 40), 1LL << 52};
  const std::vector<long long> counts = {-65, -1, 0, 1, 7, 8, 16, 30, 31, 32, 33, 62, 63, 64, 65, 100};
  for (long long a : values) {
    const Expr ea = cast(Expr(0), DType::I64) + Expr(int64_t(a));
    for (long long b : values) {
      const Expr eb = cast(Expr(0), DType::I64) + Expr(int64_t(b));
      EXPECT_EQ(a & b, interp(bitwise_and(ea, eb))) << a << " & " << b;
      EXPECT_EQ(a | b, interp(bitwise_or(ea, eb))) << a << " | " << b;
      EXPECT_EQ(a ^ b, interp(bitwise_xor(ea, eb))) << a << " ^ " << b;
      EXPECT_EQ(a ^ b, interp(ea ^ eb)) << a << " ^ " << b << " (operator)";
    }
    EXPECT_EQ(~a, interp(bitwise_not(ea))) << "~" << a;
    EXPECT_EQ(~a, interp(~ea)) << "~" << a << " (operator)";
    for (long long s : counts) {
      const Expr es = cast(Expr(0), DType::I64) + Expr(int64_t(s));
      EXPECT_EQ(fa_shl(a, s), interp(bitwise_left_shift(ea, es))) << a << " << " << s;
      EXPECT_EQ(fa_shr(a, s), interp(bitwise_right_shift(ea, es))) << a << " >> " << s;
      if (s >= 0 && s < 64) {
        EXPECT_EQ(fa_shl(a, s), (long long)((unsigned long long)a << s)) << a << " << " << s;
        EXPECT_EQ(fa_shr(a, s), a >> s) << a << " >> " << s;
      } else {
        EXPECT_EQ(fa_shl(a, s), 0) << a << " << " << s;
        EXPECT_EQ(fa_shr(a, s), a < 0 ? -1 : 0) << a << " >> " << s;
      }
      if (a == (int)a && s == (int)s) {  // strong i32
        const Expr ia = q_idx() * 0 + Expr(int(a)), is = q_idx() * 0 + Expr(int(s));
        EXPECT_EQ(fa_shl(int(a), int(s)), interp(bitwise_left_shift(ia, is))) << a << " << " << s << " (i32)";
        EXPECT_EQ(fa_shr(int(a), int(s)), interp(bitwise_right_shift(ia, is))) << a << " >> " << s << " (i32)";
        EXPECT_EQ(int(a) & int(s), interp(ia & is)) << a << " & " << s << " (i32)";
      }
    }
  }
  // Values written out (not the helpers' own formulas): i32 wraparound, arithmetic right shifts, the ATen edges.
  EXPECT_EQ(fa_shl(1, 31), INT_MIN);
  EXPECT_EQ(fa_shl(3, 31), INT_MIN);
  EXPECT_EQ(fa_shl(0x00FF00FF, 8), int(0xFF00FF00u));
  EXPECT_EQ(fa_shr(-8, 1), -4);
  EXPECT_EQ(fa_shr(-1, 31), -1);
  EXPECT_EQ(fa_shr(INT_MIN, 40), -1);
  EXPECT_EQ(fa_shr(INT_MAX, 40), 0);
  EXPECT_EQ(fa_shl(5, -1), 0);
  EXPECT_EQ(fa_shl(1LL, 63LL), LLONG_MIN);
  EXPECT_EQ(fa_shr(-(1LL << 40), 38LL), -4);
  EXPECT_EQ(interp(bitwise_left_shift(q_idx() * 0 + Expr(1), Expr(31))), INT_MIN);
  EXPECT_EQ(interp(bitwise_right_shift(q_idx() * 0 + Expr(-8), Expr(33))), -1);
  EXPECT_EQ(interp(bitwise_xor(q_idx() * 0 + Expr(12), Expr(10))), 6);
  EXPECT_EQ(interp(bitwise_not(q_idx() * 0 + Expr(5))), -6);
  // Types: integers only; bools stay logical through the operators, floats are refused by name.
  EXPECT_EQ(bitwise_and(q_idx(), kv_idx())->op, Op::BitAnd);
  EXPECT_EQ((q_idx() & kv_idx())->op, Op::BitAnd);
  EXPECT_EQ(((q_idx() > 1) & (kv_idx() > 1))->op, Op::And);
  EXPECT_EQ(((q_idx() > 1) ^ (kv_idx() > 1))->op, Op::Ne);
  EXPECT_EQ((~(q_idx() > 1))->op, Op::Not);
  EXPECT_EQ(bitwise_left_shift(q_idx(), cast(kv_idx(), DType::I64))->type, DType::I64);
  EXPECT_EQ(print(~q_idx()), "-q_idx - 1");  // the tracer's spelling: one structure for one mod
  for (const auto& mixed : {std::make_pair(q_idx() > kv_idx(), score()), std::make_pair(score(), score())}) {
    try {
      (void)(mixed.first ^ mixed.second);
      ADD_FAILURE() << "^ accepted " << print(mixed.first) << " and " << print(mixed.second);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'^': expects two bools or two integers, got "), std::string::npos)
          << e.what();
    }
  }
  try {
    bitwise_and(score(), q_idx());
    ADD_FAILURE() << "a float operand was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'bitwise_and': expects integer operands, got f32 and i32"), std::string::npos)
        << e.what();
  }
}
