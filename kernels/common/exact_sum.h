#pragma once
// Exact, order-independent sums of fp32 values: the deterministic mode's buffer gradients (issue 6: bitwise
// identical buffer grads run to run; fp32 atomics add in arrival order, so their rounding differs run to run).
//
// Every finite fp32 value is an integer multiple of 2^-149 below 2^128: m * 2^pos with a 24-bit significand m and
// pos in [0, 253] (units of 2^-149). An accumulator holds kExactWindows signed 64-bit words, word k weighing
// 2^(8 k - 149): a value goes into word pos / 8 as m << (pos % 8), less than 2^31, so each value is one 64-bit
// addition (one RED.ADD.64; windows 32 bits apart took two for 3 values in 4: session 32). Limit: a word wraps
// (silently) once its net sum passes 2^63, which takes more than 2^32 additions of one sign into one word of one
// element (e.g. 2^33 equal values): the sm90 backward's per-warp sums add one value per warp and tile, but the
// per-entry paths (the sm80 family, edge tiles, general index functions) add one per attended entry. Integer additions commute, so any order of arrival gives the same words, and
// exact_to_float rounds the exact sum once. Infinities and NaNs set bits in one more word (kExactFlagWord), combined
// as IEEE sums combine them.
//
// Host and device: the host tests use the same split and conversion.
#include "common/float_bits.h"
#include "common/params.h"

namespace flexattn::kern {

constexpr int kExactWindows = 32;              // 8-bit steps over pos in [0, 253]
constexpr int kExactFlagWord = kExactWindows;  // bit 0: +inf, bit 1: -inf, bit 2: NaN
constexpr int kExactWords = kExactWindows + 1; // 264 bytes per accumulated element
constexpr int kExactDigits = 9;                // exact_to_float's 32-bit digits: 2^-149 .. 2^139, then the sign

// A value's one word increment: words[word] += add (|add| < 2^31). flags != 0 for a non-finite value (then nothing is
// added); word = -1 for a zero.
struct ExactPart {
  int word;
  long long add;
  unsigned flags;
};

FLEXATTN_HD_INLINE ExactPart exact_split(unsigned bits) {
  const int e = int((bits >> 23) & 0xffu);
  const unsigned frac = bits & 0x7fffffu;
  if (e == 0xff) return ExactPart{-1, 0, frac != 0 ? 4u : (bits >> 31) != 0 ? 2u : 1u};
  if (e == 0 && frac == 0) return ExactPart{-1, 0, 0u};
  const unsigned m = e != 0 ? (frac | 0x800000u) : frac;
  const int pos = (e != 0 ? e : 1) - 1;  // bit position of m's lowest bit above 2^-149
  const long long x = (long long)(m << (pos & 7));
  return ExactPart{pos >> 3, (bits >> 31) != 0 ? -x : x, 0u};
}

// The accumulator's value rounded to fp32 (to nearest even; subnormal results are exact: the sum is a multiple of
// 2^-149). Word k of the accumulator is words[k * stride] (a buffer's accumulators are word-major: see exact_add).
FLEXATTN_HD_INLINE float exact_to_float(const long long* words, long long stride = 1) {
  const unsigned flags = (unsigned)words[kExactFlagWord * stride];
  if ((flags & 4u) != 0 || (flags & 3u) == 3u) return bits_float(0x7fc00000);
  if ((flags & 1u) != 0) return bits_float(0x7f800000);
  if ((flags & 2u) != 0) return bits_float(int(0xff800000u));
  // The windows onto 32-bit digits (unnormalised: each digit gets a few terms below 2^57), then the carries, the
  // sign in the last digit (two's complement over kExactDigits + 1 digits).
  long long acc[kExactDigits] = {};
  for (int k = 0; k < kExactWindows; ++k) {
    const long long w = words[k * stride];
    const int q = (8 * k) >> 5, r = (8 * k) & 31;  // q <= 7
    const unsigned long long t = ((unsigned long long)w & 0xffffffffull) << r;  // < 2^56
    acc[q] += (long long)(t & 0xffffffffull);
    acc[q + 1] += (long long)(t >> 32) + (w >> 32) * (1ll << r);  // |w >> 32| < 2^31
  }
  unsigned d[kExactDigits + 1];
  long long carry = 0;
  for (int k = 0; k < kExactDigits; ++k) {
    const long long t = acc[k] + carry;
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
  if (s < -126) f *= bits_float(27 << 23), s += 100;  // 2^-100, exact (f >= 2^63); then s >= -112
  f *= bits_float((s + 127) << 23);
  return negative ? -f : f;
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// Adds v into an accumulator in global memory whose word k is words[k * stride] (relaxed atomics: the sum is the
// same in any order; the kernel's completion orders it before exact_to_float's reads). A buffer's accumulators are
// word-major ([kExactWords][numel], stride = numel): neighbouring elements of similar magnitude (a warp's diagonals)
// then add into neighbouring words, a few sectors per warp-wide reduction instead of one per lane (element-major,
// with two words per value 80 bytes apart, cost the deterministic relative-bias backward ~5x the fp32 atomics' time;
// word-major halved that: H100, session 32, s32b / s32c).
// The accumulators are global memory (the backward's workspace): red.global, where atomicAdd on the generic pointer
// compiled to an ATOM with a shared-memory fallback branch per add.
__device__ __forceinline__ void exact_add(unsigned long long* words, long long stride, float v) {
  const ExactPart x = exact_split(unsigned(float_bits(v)));
  if (x.flags != 0) {
    atomicOr(reinterpret_cast<unsigned*>(words + kExactFlagWord * stride), x.flags);
  } else if (x.word >= 0) {
    const size_t at = __cvta_generic_to_global(words + x.word * stride);
    asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(at), "l"((unsigned long long)x.add) : "memory");
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
