// The generated gathers clamp i32 indices in 32 bits (fa_clamp_index32), which is exact only for buffer
// dimensions below 2^31: the host refuses larger ones when it fills ModParams, before any launch.
#include <gtest/gtest.h>

#include "error_of.h"
#include "flexattn/codegen.h"
#include "flexattn/expr.h"
#include "common/params.h"
#include "runtime/kernel_set.h"

using namespace flexattn;
using flexattn::test::error_of;

TEST(ModParams, BufferDimensionsOfTwoToTheThirtyOneAreRefused) {
  const ir::Buffer bias{"bias", DType::F32};
  Variant v;
  v.score_mod = ir::score() + bias(ir::head(), ir::q_idx() - ir::kv_idx());
  const codegen::GeneratedVariant gen = codegen::emit_cuda_variant(v, false);
  static float mem[4];
  DeviceBindings b;
  b.buffers["bias"] = ir::BufferView{DType::F32, {4, 0x7fffffffLL}, mem};  // never read: no launch
  kern::ModParams p;
  runtime::fill_mod_params(gen.layout, b, false, &p);
  EXPECT_EQ(p.buf_shape[0][1], 0x7fffffffLL);
  EXPECT_EQ(p.buf_numel[0], 4 * 0x7fffffffLL);  // the exact accumulators' word stride (common/exact_sum.h)
  b.buffers["bias"] = ir::BufferView{DType::F32, {16, 255}, mem};
  runtime::fill_mod_params(gen.layout, b, false, &p);
  EXPECT_EQ(p.buf_numel[0], 16 * 255);
  EXPECT_EQ(p.buf_shape[0][2], 1);
  b.buffers["bias"] = ir::BufferView{DType::F32, {4, 0x80000000LL}, mem};
  EXPECT_EQ(error_of([&] { runtime::fill_mod_params(gen.layout, b, false, &p); }),
            "buffer 'bias' has a dimension of 2147483648 elements; the cuda kernels take at most 2^31 - 1 per "
            "dimension");
}

// FLEXATTN_JIT_FAST_COMPILE turns into NVRTC's --Ofast-compile (part of the kernel-cache key through the
// request's options); any other value is refused by name before a compile starts.
TEST(JitOptions, FastCompileLevelsAndAClearErrorForOthers) {
  unsetenv("FLEXATTN_JIT_FAST_COMPILE");
  EXPECT_TRUE(runtime::jit_compile_options().empty());
  setenv("FLEXATTN_JIT_FAST_COMPILE", "0", 1);
  EXPECT_TRUE(runtime::jit_compile_options().empty());
  setenv("FLEXATTN_JIT_FAST_COMPILE", "min", 1);
  EXPECT_EQ(runtime::jit_compile_options(), std::vector<std::string>{"--Ofast-compile=min"});
  setenv("FLEXATTN_JIT_FAST_COMPILE", "fast", 1);
  EXPECT_EQ(error_of([] { runtime::jit_compile_options(); }),
            "FLEXATTN_JIT_FAST_COMPILE: expected 0, min, mid or max, got 'fast'");
  unsetenv("FLEXATTN_JIT_FAST_COMPILE");
}
