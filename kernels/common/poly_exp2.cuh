#pragma once
// exp2 on the FMA and integer pipes instead of the MUFU (FlashAttention-4's offload idea, our own
// polynomial): x = j + f with j = round(x) (the 1.5 * 2^23 shifter leaves j in the low mantissa bits) and
// |f| <= 0.5; 2^f by a degree-5 fit of minimal relative error on [-0.5, 0.5] (coefficients fitted for this
// file); 2^j by adding j to the exponent field. Max relative error 2.4e-7 over [-125, 8] in f32 arithmetic
// (tests/unit/kernels/test_poly_exp2_host.cc), the size of ex2.approx's 2 ulp. Below -125 (and -inf) it
// returns +0, as the softmax needs for masked entries; a NaN argument also gives 0 (ex2.approx: NaN).
// 12 SASS instructions (FMNMX, 3 FADD, 5 FFMA, IMAD shift-add, FSETP, FSEL) against one MUFU op, which
// holds its SMSP's quarter-rate pipe for 8 cycles per warp: worth it for a fraction of the entries only.
// Compiles under NVRTC and as host C++ (the tests), like mod_ops.cuh.
#include "common/float_bits.h"
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define FA_POLY_FN __device__ __forceinline__
#else
#include <cmath>
#define FA_POLY_FN inline
#endif

namespace flexattn::kern {

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
FA_POLY_FN float poly_add_rn(float a, float b) { return __fadd_rn(a, b); }  // never contracted or folded
#else
inline float poly_add_rn(float a, float b) { return a + b; }
#endif

FA_POLY_FN float poly_exp2(float x) {
  const float xc = fmaxf(x, -125.f);
  const float shifted = poly_add_rn(xc, 12582912.f);
  const float f = poly_add_rn(xc, -poly_add_rn(shifted, -12582912.f));
  float q = 1.327697653e-03f;
  q = fmaf(q, f, 9.675545618e-03f);
  q = fmaf(q, f, 5.550711602e-02f);
  q = fmaf(q, f, 2.402212024e-01f);
  q = fmaf(q, f, 6.931469440e-01f);
  q = fmaf(q, f, 1.000000119e+00f);
  const float y = bits_float(int((unsigned)float_bits(q) + ((unsigned)float_bits(shifted) << 23)));
  return x > -125.f ? y : 0.f;
}

}  // namespace flexattn::kern
