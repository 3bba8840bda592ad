#pragma once
// Device helpers used by generated variant code. Each one implements exactly the definition of the
// corresponding IR node in src/ir/eval.cc (in f32 instead of double): Python floor division and
// modulo, wrapping integer arithmetic, NaN-propagating min/max, saturating float->int casts, and
// clamped buffer gathers. Compiles under NVRTC (no std headers) and as host C++ (for tests).
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define FA_MOD_FN __device__ __forceinline__
#else
#define FA_MOD_FN inline
#include <cmath>
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
// Shifts as ATen defines them: a count outside [0, bits) gives 0 (left) or the sign (right, arithmetic).
FA_MOD_FN int fa_shl(int a, int b) { return b < 0 || b >= 32 ? 0 : (int)((unsigned)a << b); }
FA_MOD_FN long long fa_shl(long long a, long long b) {
  return b < 0 || b >= 64 ? 0 : (long long)((unsigned long long)a << b);
}
FA_MOD_FN int fa_shr(int a, int b) { return a >> (b < 0 || b >= 32 ? 31 : b); }
FA_MOD_FN long long fa_shr(long long a, long long b) { return a >> (b < 0 || b >= 64 ? 63 : b); }

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
// kv ranges (codegen's kKvRange: a mask_mod that keeps lo <= kv_idx <= hi per query row, src/ir/kv_range.cc).
// A bound is q_idx +- e (+-1) with e any value of the mod: e is first saturated to +-2^40, which changes no
// comparison with an index (|q_idx|, |kv_idx| < 2^31) and keeps the sum exact in 64 bits. kFaKvOpen is the
// bound of an open side (no row keeps kv past it; an empty row has lo > hi).
constexpr long long kFaKvOpen = 1LL << 42;
FA_MOD_FN long long fa_kv_sat(long long e) {
  const long long m = 1LL << 40;
  return e < -m ? -m : e > m ? m : e;
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
// Element row + col (col: a clamped i32 index, codegen's FlatIndex): the row's address is formed once
// (rows are indexed by h, b, ... in practice, so it is the same for every entry) and an entry costs one
// IMAD.WIDE.U32. The asm (the generic -> global conversion the loads below need) hides the row pointer
// from the optimizer, which otherwise folds row + col back into one 64-bit index (multiply-add, shift
// and add per entry, seen in the SASS); it is not volatile, so equal rows are still computed once.
FA_MOD_FN const void* fa_row_ptr(const void* p) {
  const void* r;
  asm("cvta.to.global.u64 %0, %1;" : "=l"(r) : "l"(p));
  return r;
}
// Reads of the element (the buffers are read-only inside a kernel; gradients go to buf_grad), two kinds:
//  integer and bool buffers (index tables of masks: doc_ids, page maps, bool masks) through __ldg
//    (ld.global.nc): an intrinsic the optimizer knows to be free of side effects, so equal addresses of a
//    tile are loaded once. doc_ids[q_idx] == doc_ids[kv_idx] over the 32 entries of a backward thread
//    (16 query columns, 2 kv rows) went from 64 LDG to 18 (sm_90a SASS, session 11).
//  float buffers (score_mod gathers such as bias[h, q_idx - kv_idx]: one address per entry, nothing to
//    share) through a weak asm ld.global: with __ldg the optimizer hoisted a tile's 32 gathers together and
//    the v2 backward of relbias(learnable) spilled 16 bytes at D=128.
#define FA_LD_ASM(T, ptx, cons)                                                   \
  FA_MOD_FN T fa_ld_##T(const void* row, unsigned col) {                          \
    T v;                                                                          \
    asm("ld.global." ptx " %0, [%1];" : "=" cons(v) : "l"((const T*)row + col)); \
    return v;                                                                     \
  }
#define FA_LD_NC(T) \
  FA_MOD_FN T fa_ld_##T(const void* row, unsigned col) { return __ldg((const T*)row + col); }
typedef unsigned short fa_u16;
typedef unsigned char fa_u8;
typedef long long fa_i64;
FA_LD_ASM(float, "f32", "f")
FA_LD_ASM(fa_u16, "u16", "h")
FA_LD_NC(int)
FA_LD_NC(fa_i64)
#undef FA_LD_ASM
#undef FA_LD_NC
FA_MOD_FN unsigned fa_ld_fa_u8(const void* row, unsigned col) { return __ldg((const fa_u8*)row + col); }
FA_MOD_FN float fa_read_f32(const void* p, long long row, unsigned col) {
  return fa_ld_float(fa_row_ptr((const float*)p + row), col);
}
FA_MOD_FN float fa_read_bf16(const void* p, long long row, unsigned col) {
  return __uint_as_float(((unsigned)fa_ld_fa_u16(fa_row_ptr((const fa_u16*)p + row), col)) << 16);
}
FA_MOD_FN float fa_read_f16(const void* p, long long row, unsigned col) {
  const unsigned short h = fa_ld_fa_u16(fa_row_ptr((const fa_u16*)p + row), col);
  float f;
  asm("{ .reg .b16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h));
  return f;
}
FA_MOD_FN int fa_read_i32(const void* p, long long row, unsigned col) {
  return fa_ld_int(fa_row_ptr((const int*)p + row), col);
}
FA_MOD_FN long long fa_read_i64(const void* p, long long row, unsigned col) {
  return fa_ld_fa_i64(fa_row_ptr((const fa_i64*)p + row), col);
}
FA_MOD_FN bool fa_read_bool(const void* p, long long row, unsigned col) {
  return fa_ld_fa_u8(fa_row_ptr((const fa_u8*)p + row), col) != 0;
}
#endif

// tanh(x) = 1 - 2 / (2^(2 x log2 e) + 1), branch-free with 2 MUFU ops where CUDA's tanhf selects
// between a polynomial and this formula (~20 instructions; softcap runs it on every entry). Absolute
// error <= ~7e-7 (ex2.approx and rcp.approx: 2 ulp each): a softcap of 30 turns it into a score error of
// ~1e-5, far below bf16's rounding of P. Five instructions and no special cases: e + 1 is in [1, +inf],
// where rcp.approx.ftz is defined (rcp(+inf) = 0: x >= 44.4 gives exactly 1, x <= -44 gives e = 0 and
// exactly -1), and a NaN x stays NaN through ex2 and rcp.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
FA_MOD_FN float fa_tanh_rcp(float t) {  // 1 / (2^t + 1), t = 2 x log2 e
  float e, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(t));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(e + 1.0f));
  return r;
}
#else
// Host build (tests): the same formula in f32 without the approximate instructions.
inline float fa_tanh_rcp(float t) { return 1.0f / (std::exp2(t) + 1.0f); }
using std::fmaf;
#endif
FA_MOD_FN float fa_tanh(float x) { return fmaf(-2.0f, fa_tanh_rcp(x * 2.8853900817779268f), 1.0f); }
// tanh_approx (IR TanhApprox): one MUFU op, relative error <= 2^-10.99 (PTX ISA, tanh.approx.f32), NaN stays NaN,
// +-inf give +-1. The host build (tests) computes tanh: the node's definition (src/ir/eval.cc).
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
FA_MOD_FN float fa_tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#else
inline float fa_tanh_approx(float x) { return std::tanh(x); }
#endif
// tanh(x * k) and u * tanh(x * k) for k, u the same for every entry (codegen: a tanh of a product or
// quotient by a uniform value, times a uniform value; softcap is cap * tanh(score * (1 / cap))):
// k * 2 log2 e, -2 u are computed once, so softcap costs an FMUL, two MUFU, an FADD and an FFMA per
// entry instead of three more FMULs. Same error as fa_tanh (the scale takes one rounding either way;
// u - 2 u r rounds once where u (1 - 2 r) rounds twice).
FA_MOD_FN float fa_tanh_scaled(float x, float k) {
  return fmaf(-2.0f, fa_tanh_rcp(x * (k * 2.8853900817779268f)), 1.0f);
}
FA_MOD_FN float fa_mul_tanh(float u, float x, float k) {
  return fmaf(-2.0f * u, fa_tanh_rcp(x * (k * 2.8853900817779268f)), u);
}

// The sm90 forward's folded softcap (fwd_softmax_sm90.cuh, kSoftcap: score_mod = u * tanh(score * k)): its tile
// keeps r per entry from t = raw * k2 and takes the score in log2 units as w = a * r + top (a < 0: w decreases in
// r). tanh: r = 1 / (2^t + 1), tanh(sgn(u) x) = 1 - 2 r, so k2 = sgn(u) scale k 2 log2(e), a = -2 |u| log2(e),
// top = |u| log2(e). tanh_approx (kSoftcapApprox): r = tanh.approx(t) = -tanh(sgn(u) x), so k2 = -sgn(u) scale k,
// a = -|u| log2(e), top = 0. a is at most -1e-30, so a masked entry's r = +inf gives -inf even for u = 0. Host and
// device (the constants' test, tests/unit/codegen/test_emit_cuda.cc).
struct FaSoftcapFold {
  float k2, a, top;
};
FA_MOD_FN FaSoftcapFold fa_softcap_fold(float u, float k, float scale, bool approx) {
  const float top = fabsf(u) * 1.4426950408889634f;
  if (approx) return {u < 0.f ? scale * k : -(scale * k), fminf(-top, -1e-30f), 0.f};
  return {scale * k * (u < 0.f ? -2.8853900817779268f : 2.8853900817779268f), fminf(-2.f * top, -1e-30f), top};
}

// Python-style negative wrap once, then clamp: an out-of-range gather is undefined in torch; here it
// never reads out of bounds (same rule as ir::clamp_index).
FA_MOD_FN long long fa_clamp_index(long long i, long long size) {
  if (i < 0) i += size;
  if (i < 0) i = 0;
  if (i >= size) i = size - 1;
  return i;
}
// The same rule for an i32 index (q_idx - kv_idx + S - 1 and the like) in 32-bit arithmetic; exact
// because the host refuses buffer dimensions of 2^31 or more (runtime fill_mod_params), so i + size
// cannot overflow for i < 0. Zero-extended, the result indexes 64-bit flat offsets at no cost. The
// 64-bit form costs ~20 instructions per entry of a gather mod (6 ISETP.*.EX, 7 SEL, IMAD.WIDE, ...
// in the relbias sm90 forward), this one ~4.
FA_MOD_FN unsigned fa_clamp_index32(int i, long long size) {
  const int s = (int)size;
  const int lo = (int)((unsigned)i + (unsigned)s);  // used only for i < 0, where it cannot overflow (computed always)
  const int j = i < 0 ? (lo < 0 ? 0 : lo) : (i >= s ? s - 1 : i);
  return (unsigned)j;
}
// fa_clamp_index32 for an index that is never negative (b, h, q_idx, kv_idx: the kernels pass positions in
// [0, 2^30), the hosts refuse negative offsets; codegen decides): the same result there, one unsigned min. A
// negative value (a bad device array behind a call that skipped its checks) still reads inside the buffer (its
// last element).
FA_MOD_FN unsigned fa_clamp_position32(int i, long long size) {
  const unsigned last = (unsigned)((int)size - 1);
  return (unsigned)i < last ? (unsigned)i : last;
}
// 1 / d in IEEE f32, for a divisor that is the same for every entry of a kernel (a literal, a scalar or an
// expression of those; codegen decides): x / d is emitted as x * fa_rcp(d), which the compiler computes
// once. Within 2 ulp of the correctly rounded quotient (tests/unit/ir/test_mod_ops_host.cc measures it),
// as faithful as torch flex, whose Triton kernels compile f32 `/` to div.full.f32 (2 ulp;
// triton-lang/triton#10661), where the IEEE division is ~10 instructions and a slow-path call per entry.
FA_MOD_FN float fa_rcp(float d) { return 1.0f / d; }
