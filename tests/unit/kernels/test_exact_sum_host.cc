// kernels/common/exact_sum.h on the host: the deterministic mode's buffer-gradient accumulator. The sum must not
// depend on the order of the additions and must be the exact sum rounded once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/exact_sum.h"

namespace {

using flexattn::kern::ExactPart;
using flexattn::kern::kExactFlagWord;
using flexattn::kern::kExactWords;

unsigned bits_of(float f) { return unsigned(flexattn::kern::float_bits(f)); }

// What exact_add does on the device, one value at a time.
void add(std::vector<long long>& w, float v) {
  const ExactPart x = flexattn::kern::exact_split(bits_of(v));
  if (x.flags != 0) {
    w[kExactFlagWord] |= x.flags;
  } else if (x.word >= 0) {
    w[x.word] += x.add;
  }
}

float exact_sum(const std::vector<float>& values) {
  std::vector<long long> w(kExactWords, 0);
  for (float v : values) add(w, v);
  return flexattn::kern::exact_to_float(w.data());
}

// Reference for values in [2^-40, 2^40): the exact sum in 128-bit fixed point (2^-64 units), rounded by the
// compiler's correctly rounded __int128 -> float conversion, then scaled by an exact power of two.
float fixed_point_sum(const std::vector<float>& values) {
  __int128 acc = 0;
  for (float v : values) acc += (__int128)std::ldexp((long double)v, 64);
  return std::ldexp((float)acc, -64);
}

TEST(ExactSum, SameBitsInAnyOrderAndEqualToTheRoundedExactSum) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(-1.f, 1.f);
  std::uniform_int_distribution<int> expo(-30, 30);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> v(1000 + trial * 37);
    for (float& x : v) x = std::ldexp(mant(rng), expo(rng));
    const float want = fixed_point_sum(v);
    const float a = exact_sum(v);
    std::shuffle(v.begin(), v.end(), rng);
    const float b = exact_sum(v);
    std::reverse(v.begin(), v.end());
    const float c = exact_sum(v);
    EXPECT_EQ(bits_of(a), bits_of(want)) << trial << ": " << a << " vs " << want;
    EXPECT_EQ(bits_of(a), bits_of(b)) << trial;
    EXPECT_EQ(bits_of(a), bits_of(c)) << trial;
  }
}

TEST(ExactSum, RoundsOnceWhereSequentialFp32DoesNot) {
  const float h = std::ldexp(1.f, -24);  // half an ulp of 1
  // fp32 in this order: (1 + h) ties to 1, + h ties to 1 again; the exact sum 1 + 2^-23 is representable.
  EXPECT_EQ(exact_sum({1.f, h, h}), 1.f + std::ldexp(1.f, -23));
  // Cancellation keeps the small terms.
  EXPECT_EQ(exact_sum({1e30f, 3.f, -1e30f}), 3.f);
  EXPECT_EQ(exact_sum({3e38f, 3e38f, -3e38f}), 3e38f);  // the intermediate 6e38 is not an fp32 value
  EXPECT_EQ(exact_sum({0.1f, -0.1f}), 0.f);
  EXPECT_EQ(exact_sum({}), 0.f);
  EXPECT_EQ(exact_sum({-2.5f, 0.5f}), -2.f);
}

TEST(ExactSum, DenormalsLargeValuesAndManyCarries) {
  const float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(exact_sum({tiny, tiny, tiny}), 3 * tiny);
  EXPECT_EQ(exact_sum({tiny, -tiny}), 0.f);
  EXPECT_EQ(exact_sum({std::numeric_limits<float>::min(), -tiny}),
            std::nextafter(std::numeric_limits<float>::min(), 0.f));
  const float big = std::numeric_limits<float>::max();
  EXPECT_EQ(exact_sum({big}), big);
  EXPECT_EQ(exact_sum({-big}), -big);
  EXPECT_TRUE(std::isinf(exact_sum({big, big})));
  EXPECT_GT(exact_sum({big, big}), 0.f);
  EXPECT_LT(exact_sum({-big, -big}), 0.f);
  // The extremes in one sum: windows 0 and 31 at once, then cancelled.
  EXPECT_EQ(exact_sum({big, tiny, -big}), tiny);
  EXPECT_EQ(exact_sum({-tiny, big, big, -big, -big}), -tiny);
  // 200000 additions of 0.1f carry through the low digits many times.
  std::vector<float> v(200000, 0.1f);
  EXPECT_EQ(bits_of(exact_sum(v)), bits_of(fixed_point_sum(v)));
  for (size_t i = 0; i < v.size(); i += 2) v[i] = -0.3f;
  EXPECT_EQ(bits_of(exact_sum(v)), bits_of(fixed_point_sum(v)));
}

TEST(ExactSum, InfinitiesAndNaNsCombineAsIeeeSums) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(exact_sum({1.f, inf, 2.f}), inf);
  EXPECT_EQ(exact_sum({-inf, 1.f}), -inf);
  EXPECT_TRUE(std::isnan(exact_sum({inf, -inf})));
  EXPECT_TRUE(std::isnan(exact_sum({1.f, std::nanf("")})));
}

}  // namespace
