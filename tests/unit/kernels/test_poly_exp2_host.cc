// kernels/common/poly_exp2.cuh as host C++: the polynomial exp2 the sm90 softmax may run on the FMA pipe
// (FLEXATTN_SM90_POLY_EXP2) must be as accurate as ex2.approx (2 ulp) wherever the softmax evaluates it
// (arguments <= 8 with the lazy rescale) and exactly 0 for masked entries.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/poly_exp2.cuh"

using flexattn::kern::poly_exp2;

TEST(PolyExp2Host, RelativeErrorIsWithinThreeUlpFromMinus125To8) {
  double worst = 0, at = 0;
  for (int i = 0; i <= 2000000; ++i) {
    const float x = float(-125.0 + 133.0 * i / 2000000.0);
    if (!(x > -125.f)) continue;
    const double want = std::exp2(double(x));
    const double err = std::fabs(double(poly_exp2(x)) - want) / want;
    if (err > worst) worst = err, at = x;
  }
  EXPECT_LT(worst, 3.6e-7) << "at x = " << at;  // 3 ulp of 1.0f = 3.58e-7
}

TEST(PolyExp2Host, IntegersAndHalvesAreExactOrNearlySo) {
  for (int j = -124; j <= 8; ++j) {
    EXPECT_NEAR(poly_exp2(float(j)) / std::ldexp(1.0, j), 1.0, 2.4e-7) << j;
    EXPECT_NEAR(poly_exp2(j + 0.5f) / std::exp2(j + 0.5), 1.0, 2.4e-7) << j;
  }
}

TEST(PolyExp2Host, MaskedAndTinyArgumentsGiveZero) {
  EXPECT_EQ(poly_exp2(-std::numeric_limits<float>::infinity()), 0.f);
  EXPECT_EQ(poly_exp2(-1000.f), 0.f);
  EXPECT_EQ(poly_exp2(-125.f), 0.f);
  EXPECT_EQ(poly_exp2(std::numeric_limits<float>::quiet_NaN()), 0.f);
  EXPECT_GT(poly_exp2(-124.99f), 0.f);
  EXPECT_FALSE(std::signbit(poly_exp2(-124.99f)));
}

TEST(PolyExp2Host, IsMonotoneAcrossTheIntegerSplit) {
  // The rounding shifter splits x at half-integers; the value must not step backwards there.
  for (int j = -120; j <= 8; ++j) {
    const float h = j + 0.5f;
    const float below = std::nextafter(h, -1e9f), above = std::nextafter(h, 1e9f);
    EXPECT_LE(poly_exp2(below), poly_exp2(h)) << h;
    EXPECT_LE(poly_exp2(h), poly_exp2(above)) << h;
  }
}
