#pragma once
// Device helpers used by generated variant code. Each one implements exactly the definition of the
// corresponding IR node in src/ir/eval.cc (in f32 instead of double): Python floor division and
// modulo, wrapping integer arithmetic, NaN-propagating min/max, saturating float->int casts, and
// clamped buffer gathers. Compiles under NVRTC (no std headers) and as host C++ (for tests).
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define FA_MOD_FN __device__ __forceinline__
#else
#define FA_MOD_FN inline
#endif

// Integer arithmetic wraps (torch int tensors wrap); done in unsigned to avoid C++ UB.
FA_MOD_FN int fa_add(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
FA_MOD_FN int fa_sub(int a, int b) { return (int)((unsigned)a - (unsigned)b); }
FA_MOD_FN int fa_mul(int a, int b) { return (int)((unsigned)a * (unsigned)b); }
FA_MOD_FN int fa_neg(int a) { return (int)(0u - (unsigned)a); }
FA_MOD_FN int fa_abs(int a) { return a < 0 ? fa_neg(a) : a; }
FA_MOD_FN long long fa_add(long long a, long long b) {
  return (long long)((unsigned long long)a + (unsigned long long)b);
}
FA_MOD_FN long long fa_sub(long long a, long long b) {
  return (long long)((unsigned long long)a - (unsigned long long)b);
}
FA_MOD_FN long long fa_mul(long long a, long long b) {
  return (long long)((unsigned long long)a * (unsigned long long)b);
}
FA_MOD_FN long long fa_neg(long long a) { return (long long)(0ull - (unsigned long long)a); }
FA_MOD_FN long long fa_abs(long long a) { return a < 0 ? fa_neg(a) : a; }

// Python floor division / modulo; x // 0 == x % 0 == 0 (the interpreter's definition). The remainder
// comes from the quotient (one hardware division, not two).
// Branch-free: the division runs unconditionally on a safe divisor and the special cases are selects.
// With early returns, every entry's division sat in its own conditional block, so the compiler could
// not share `q_idx // n` between the entries of a row (530 division sequences in one kernel's SASS).
template <typename T>
FA_MOD_FN T fa_floordiv(T a, T b) {
  const bool special = b == 0 || b == -1;
  const T d = special ? (T)1 : b;
  T q = a / d;
  if (fa_sub(a, fa_mul(q, d)) != 0 && ((a < 0) != (d < 0))) q = q - 1;
  return b == 0 ? (T)0 : (b == -1 ? fa_neg(a) : q);
}
template <typename T>
FA_MOD_FN T fa_mod(T a, T b) {
  const bool special = b == 0 || b == -1;
  const T d = special ? (T)1 : b;
  T r = fa_sub(a, fa_mul(a / d, d));
  if (r != 0 && ((r < 0) != (d < 0))) r += d;
  return special ? (T)0 : r;
}
// i64 operands (an i64 cast or scalar in the mod) divide in 64 bits: a ~70-instruction subroutine on the
// GPU, run per entry of every partial tile. Values that fit in 32 bits (indices always do) take the
// 32-bit division instead; the result is the same value.
FA_MOD_FN bool fa_fits_i32(long long x) { return x == (long long)(int)x; }
FA_MOD_FN long long fa_floordiv(long long a, long long b) {
  // b == -1 stays in 64 bits: (-2^31) // -1 = 2^31 would wrap in 32.
  if (b != -1 && fa_fits_i32(a) && fa_fits_i32(b)) return fa_floordiv<int>((int)a, (int)b);
  return fa_floordiv<long long>(a, b);
}
FA_MOD_FN long long fa_mod(long long a, long long b) {
  if (fa_fits_i32(a) && fa_fits_i32(b)) return fa_mod<int>((int)a, (int)b);
  return fa_mod<long long>(a, b);
}
template <typename T>
FA_MOD_FN T fa_min_i(T a, T b) { return a < b ? a : b; }
template <typename T>
FA_MOD_FN T fa_max_i(T a, T b) { return a > b ? a : b; }
template <typename T>
FA_MOD_FN T fa_pow_i(T base, T e) {
  if (e < 0) return base == 1 ? 1 : (base == -1 ? ((e & 1) ? -1 : 1) : 0);
  T r = 1;
  while (e > 0) {
    if (e & 1) r = fa_mul(r, base);
    base = fa_mul(base, base);
    e >>= 1;
  }
  return r;
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
FA_MOD_FN float fa_nan() { return __int_as_float(0x7fffffff); }
FA_MOD_FN bool fa_isnan(float x) { return x != x; }
FA_MOD_FN float fa_floordiv_f(float a, float b) {
  if (b == 0.0f) return a / b;
  const float m = fmodf(a, b);
  float div = (a - m) / b;
  if (m != 0.0f && ((b < 0) != (m < 0))) div -= 1.0f;
  if (div == 0.0f) return copysignf(0.0f, a / b);
  float fl = floorf(div);
  if (div - fl > 0.5f) fl += 1.0f;
  return fl;
}
FA_MOD_FN float fa_mod_f(float a, float b) {
  float m = fmodf(a, b);
  if (m != 0.0f && ((b < 0) != (m < 0))) m += b;
  return m;
}
FA_MOD_FN float fa_min_f(float a, float b) { return (fa_isnan(a) || fa_isnan(b)) ? fa_nan() : (a < b ? a : b); }
FA_MOD_FN float fa_max_f(float a, float b) { return (fa_isnan(a) || fa_isnan(b)) ? fa_nan() : (a > b ? a : b); }
// tanh(x) = 1 - 2 / (2^(2 x log2 e) + 1), branch-free with 2 MUFU ops where CUDA's tanhf selects
// between a polynomial and this formula (~20 instructions; softcap runs it on every entry). Absolute
// error <= ~7e-7 (ex2.approx and div.approx: 2 ulp each): a softcap of 30 turns it into a score error of
// ~1e-5, far below bf16's rounding of P. NaN stays NaN; |x| > 43.7 gives exactly +-1.
FA_MOD_FN float fa_tanh(float x) {
  const float t = fminf(fmaxf(x * 2.8853900817779268f, -126.f), 126.f);
  float e;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(t));
  const float y = 1.0f - __fdividef(2.0f, e + 1.0f);  // e + 1 in [1, 2^126]: in div.approx's range
  return fa_isnan(x) ? x : y;
}
FA_MOD_FN float fa_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
FA_MOD_FN float fa_rsqrt(float x) { return 1.0f / sqrtf(x); }
// Saturating truncation, NaN -> 0: the hardware cvt.rzi.sat behaviour the interpreter copies.
FA_MOD_FN int fa_f2i(float x) { return __float2int_rz(x); }
FA_MOD_FN long long fa_f2ll(float x) { return __float2ll_rz(x); }

// Buffer element reads, converted to the IR value type.
FA_MOD_FN float fa_read_f32(const void* p, long long i) { return ((const float*)p)[i]; }
FA_MOD_FN float fa_read_bf16(const void* p, long long i) {
  return __uint_as_float(((unsigned)((const unsigned short*)p)[i]) << 16);
}
FA_MOD_FN float fa_read_f16(const void* p, long long i) {
  const unsigned short h = ((const unsigned short*)p)[i];
  float f;
  asm("{ .reg .b16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h));
  return f;
}
FA_MOD_FN int fa_read_i32(const void* p, long long i) { return ((const int*)p)[i]; }
FA_MOD_FN long long fa_read_i64(const void* p, long long i) { return ((const long long*)p)[i]; }
FA_MOD_FN bool fa_read_bool(const void* p, long long i) { return ((const unsigned char*)p)[i] != 0; }
#endif

// Python-style negative wrap once, then clamp: an out-of-range gather is undefined in torch; here it
// never reads out of bounds (same rule as ir::clamp_index).
FA_MOD_FN long long fa_clamp_index(long long i, long long size) {
  if (i < 0) i += size;
  if (i < 0) i = 0;
  if (i >= size) i = size - 1;
  return i;
}
