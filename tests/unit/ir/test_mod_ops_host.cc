// kernels/common/mod_ops.cuh compiled as host C++: the device definitions of // and % must give the
// interpreter's values (src/ir/eval.cc is the definition), on both the 32-bit and 64-bit paths.
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <vector>

#include "common/mod_ops.cuh"
#include "flexattn/expr.h"

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
