#pragma once
// Exact, order-independent sums of fp32 values: the deterministic mode's buffer gradients (issue 6: bitwise
// identical buffer grads run to run; fp32 atomics add in arrival order, so their rounding differs run to run).
//
// Every finite fp32 value is an integer multiple of 2^-149 below 2^128, i.e. a 277-bit fixed-point number. An
// accumulator holds it as kExactDigits signed 64-bit words, word k weighing 2^(32 k - 149): a value's 24-bit
// significand, shifted to its exponent, touches two adjacent words, each getting less than 2^32 in magnitude.
// Integer additions commute, so any order of arrival gives the same words (2^31 additions per word before a word
// could overflow, far more than any gradient element receives), and exact_to_float rounds the exact sum once.
// Infinities and NaNs set bits in one more word (kExactFlagWord), combined as IEEE sums combine them.
//
// Host and device: the host tests and the CPU reference's checks use the same split and conversion.
#include "common/params.h"

namespace flexattn::kern {

constexpr int kExactDigits = 9;                 // 9 x 32 bits cover 2^-149 .. 2^139 (and the carries above)
constexpr int kExactFlagWord = kExactDigits;    // bit 0: +inf, bit 1: -inf, bit 2: NaN
constexpr int kExactWords = kExactDigits + 1;   // 80 bytes per accumulated element

// A value's two word increments: words[word] += lo, words[word + 1] += hi (each |.| < 2^32). flags != 0 for a
// non-finite value (then nothing is added); word = -1 for a zero.
struct ExactPart {
  int word;
  long long lo, hi;
  unsigned flags;
};

FLEXATTN_HD_INLINE ExactPart exact_split(unsigned bits) {
  const int e = int((bits >> 23) & 0xffu);
  const unsigned frac = bits & 0x7fffffu;
  if (e == 0xff) return ExactPart{-1, 0, 0, frac != 0 ? 4u : (bits >> 31) != 0 ? 2u : 1u};
  if (e == 0 && frac == 0) return ExactPart{-1, 0, 0, 0u};
  const unsigned m = e != 0 ? (frac | 0x800000u) : frac;
  const int pos = (e != 0 ? e : 1) - 1;  // bit position of m's lowest bit above 2^-149
  const unsigned long long x = (unsigned long long)m << (pos & 31);
  long long lo = (long long)(x & 0xffffffffull), hi = (long long)(x >> 32);
  if ((bits >> 31) != 0) lo = -lo, hi = -hi;
  return ExactPart{pos >> 5, lo, hi, 0u};
}

FLEXATTN_HD_INLINE float exact_bits_to_float(unsigned u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  union {
    unsigned u;
    float f;
  } x{u};
  return x.f;
#endif
}

// The accumulator's value rounded to fp32 (to nearest even; below 2^-126 it may round twice). Word k of the
// accumulator is words[k * stride] (a buffer's accumulators are stored word-major: see exact_add).
FLEXATTN_HD_INLINE float exact_to_float(const long long* words, long long stride = 1) {
  const unsigned flags = (unsigned)words[kExactFlagWord * stride];
  if ((flags & 4u) != 0 || (flags & 3u) == 3u) return exact_bits_to_float(0x7fc00000u);
  if ((flags & 1u) != 0) return exact_bits_to_float(0x7f800000u);
  if ((flags & 2u) != 0) return exact_bits_to_float(0xff800000u);
  // Carries: 32-bit digits, the sign in the last one (two's complement over kExactDigits + 1 digits).
  unsigned d[kExactDigits + 1];
  long long carry = 0;
  for (int k = 0; k < kExactDigits; ++k) {
    const long long t = words[k * stride] + carry;
    d[k] = (unsigned)(t & 0xffffffffll);
    carry = t >> 32;  // arithmetic shift
  }
  d[kExactDigits] = (unsigned)(carry & 0xffffffffll);
  const bool negative = carry < 0;
  if (negative) {  // the magnitude
    unsigned long long c = 1;
    for (int k = 0; k <= kExactDigits; ++k) {
      const unsigned long long t = (unsigned long long)(~d[k]) + c;
      d[k] = (unsigned)t;
      c = t >> 32;
    }
  }
  int top = kExactDigits;
  while (top >= 0 && d[top] == 0) --top;
  if (top < 0) return 0.f;
  int up = 0;  // leading zeros of the top digit
  while (((d[top] << up) & 0x80000000u) == 0) ++up;
  // A 64-bit window whose bit 63 is the leading bit; every bit below it becomes one sticky bit, so the integer's
  // rounding to fp32 is the exact value's (24 bits end 40 bits above the sticky bit).
  const unsigned d1 = top >= 1 ? d[top - 1] : 0u, d2 = top >= 2 ? d[top - 2] : 0u;
  unsigned long long win = ((unsigned long long)d[top] << 32 | d1) << up;
  if (up > 0) win |= d2 >> (32 - up);
  bool sticky = (up > 0 ? (d2 << up) : d2) != 0;
  for (int k = top - 3; k >= 0 && !sticky; --k) sticky = d[k] != 0;
  float f = (float)(win | (sticky ? 1ull : 0ull));
  // win's bit 63 weighs 2^(32 top + 31 - up - 149): f * 2^s with s in [-212, 107], in steps inside fp32's range.
  int s = 32 * top + 31 - up - 149 - 63;
  if (s < -126) f *= exact_bits_to_float(27u << 23), s += 100;  // 2^-100, exact (f >= 2^63); then s >= -112
  f *= exact_bits_to_float(unsigned(s + 127) << 23);
  return negative ? -f : f;
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// Adds v into an accumulator in global memory whose word k is words[k * stride] (relaxed atomics: the sum is the
// same in any order; the kernel's completion orders it before exact_to_float's reads). A buffer's accumulators are
// word-major ([kExactWords][numel], stride = numel): neighbouring elements of similar magnitude (a warp's diagonals)
// then add into neighbouring words, a few sectors per warp-wide reduction instead of one per lane (element-major,
// 80 bytes apart, cost the deterministic relative-bias backward ~5x the fp32 atomics' time: H100, session 32).
__device__ __forceinline__ void exact_add(unsigned long long* words, long long stride, float v) {
  const ExactPart x = exact_split(__float_as_uint(v));
  if (x.flags != 0) {
    atomicOr(reinterpret_cast<unsigned*>(words + kExactFlagWord * stride), x.flags);
  } else if (x.word >= 0) {
    atomicAdd(words + x.word * stride, (unsigned long long)x.lo);
    if (x.hi != 0) atomicAdd(words + (x.word + 1) * stride, (unsigned long long)x.hi);
  }
}
#endif

// The finishing kernel's parameter (runtime/exact_grads.cc): out[i] += exact_to_float(words + i, n).
struct ExactGradFinishParams {
  const long long* words;
  float* out;
  long long n;
};

}  // namespace flexattn::kern
