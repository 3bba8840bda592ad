#pragma once
// 1 / y on the FMA and integer pipes instead of the MUFU, for the softcap path's tanh (1 / (2^t + 1)), whose
// two MUFU ops per entry plus the softmax's exp2 are three against a tensor-core budget of two at D = 128
// (docs/kernels_sm90.md, "softcap"). A first guess from the float's bits (0x7EF311C2 minus them: the exponent
// negated, the mantissa reflected; |1 - y x0| <= 0.0506 in every binade, fitted for this file), one Newton
// step that cubes the error (<= 1.3e-4) and one that squares it (<= 1.7e-8 before the last FFMA's rounding):
// within 0.78 ulp of 1 / y (not always correctly rounded; rcp.approx is within 1 ulp). 1 IADD + 5 FFMA
// against one MUFU op, which holds its SMSP's quarter-rate pipe for 8 cycles per warp. Only for positive
// normal y in [2^-125, 2^125] (the guess must stay normal; +inf gives -inf, 0 NaN): poly_tanh_rcp clamps its
// argument so that y stays in [1, 2^64 + 1]. A NaN y gives NaN (the Newton steps carry it).
// Compiles under NVRTC and as host C++ (tests/unit/kernels/test_poly_rcp_host.cc), like poly_exp2.cuh.
#include "common/poly_exp2.cuh"

namespace flexattn::kern {

FA_POLY_FN float poly_rcp(float y) {
  float x = bits_float(int(0x7EF311C2u - unsigned(float_bits(y))));  // unsigned: no signed overflow on the host
  float e = fmaf(-y, x, 1.f);
  x = fmaf(x, fmaf(e, e, e), x);
  e = fmaf(-y, x, 1.f);
  return fmaf(x, e, x);
}

// min(t, 64), NaN kept (fminf would return 64 for a NaN t and hide a NaN score). 2^64 + 1 keeps poly_rcp's
// guess normal, and 1 / (2^t + 1) < 2^-64 is below half an ulp of anything softcap adds it to (u - 2 u r).
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
FA_POLY_FN float poly_min_nan(float t, float hi) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(t), "f"(hi));
  return r;
}
FA_POLY_FN float poly_ex2_mufu(float t) {
  float e;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(t));
  return e;
}
#else
inline float poly_min_nan(float t, float hi) { return t != t ? t : (t < hi ? t : hi); }
inline float poly_ex2_mufu(float t) { return std::exp2(t); }
#endif

// 1 / (2^t + 1) with the exp2 on the MUFU and the reciprocal by poly_rcp: fa_tanh_rcp's value (mod_ops.cuh)
// with one MUFU op instead of two. Exactly 1 at t = -inf; NaN stays NaN.
FA_POLY_FN float poly_tanh_rcp(float t) { return poly_rcp(poly_ex2_mufu(poly_min_nan(t, 64.f)) + 1.f); }

}  // namespace flexattn::kern
