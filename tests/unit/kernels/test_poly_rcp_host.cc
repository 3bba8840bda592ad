// kernels/common/poly_rcp.cuh as host C++: the FMA-pipe reciprocal the sm90 softcap path may use
// (FLEXATTN_SM90_SOFTCAP_RCP) must be within 1 ulp of 1 / y, as rcp.approx is, over the range the softcap feeds
// it ([1, 2^64 + 1]), and 1 / (2^t + 1) must keep its ends: 1 at t = -inf, 0 in effect for large t, NaN for NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "common/poly_rcp.cuh"

using flexattn::kern::poly_rcp;
using flexattn::kern::poly_tanh_rcp;

namespace {

float from_bits(unsigned b) {
  float y;
  std::memcpy(&y, &b, 4);
  return y;
}

// |r - 1/y| in units of the last place of the float nearest 1/y.
double ulps_off(float y, float r) {
  const double exact = 1.0 / double(y);
  const float near = float(exact);
  return std::fabs(double(r) - exact) / double(std::nextafter(near, 1e30f) - near);
}

}  // namespace

TEST(PolyRcpHost, WithinOneUlpInEveryBinadeTheSoftcapUses) {
  // Every mantissa of the first and the last binades, every 37th in between: the guess's error repeats
  // per binade, so this covers each mantissa pattern.
  double worst = 0;
  float at = 0;
  for (unsigned b = 0; b <= 64; ++b) {
    const unsigned step = b == 0 || b == 64 ? 1 : 37;
    for (unsigned m = 0; m < (1u << 23); m += step) {
      const float y = from_bits(((127u + b) << 23) | m);
      const double u = ulps_off(y, poly_rcp(y));
      if (u > worst) worst = u, at = y;
    }
  }
  EXPECT_LT(worst, 1.0) << "at y = " << at;
}

TEST(PolyRcpHost, PowersOfTwoAreExact) {
  for (int j = 0; j <= 64; ++j) EXPECT_EQ(poly_rcp(std::ldexp(1.f, j)), std::ldexp(1.f, -j)) << j;
}

TEST(PolyRcpHost, TanhReciprocalMatchesItsFormula) {
  double worst = 0;
  float at = 0;
  for (int i = 0; i <= 400000; ++i) {
    const float t = float(-200.0 + 400.0 * i / 400000.0);
    const double want = 1.0 / (std::exp2(double(t)) + 1.0);
    const double got = poly_tanh_rcp(t);
    // Past t = 64 the clamp returns 2^-64 (below half an ulp of anything softcap adds it to).
    const double err = t > 64.f ? std::fabs(got - std::ldexp(1.0, -64)) / std::ldexp(1.0, -64)
                                : std::fabs(got - want) / want;
    if (err > worst) worst = err, at = t;
  }
  EXPECT_LT(worst, 2.5e-7) << "at t = " << at;  // 2^t + 1 rounds once, 1 / y within 1 ulp
}

TEST(PolyRcpHost, TanhReciprocalKeepsItsEnds) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(poly_tanh_rcp(-inf), 1.f);
  EXPECT_EQ(poly_tanh_rcp(-1000.f), 1.f);
  EXPECT_EQ(poly_tanh_rcp(0.f), 0.5f);
  const float big = poly_tanh_rcp(inf);
  EXPECT_GT(big, 0.f);
  EXPECT_LE(big, std::ldexp(1.f, -64));
  EXPECT_TRUE(std::isnan(poly_tanh_rcp(std::numeric_limits<float>::quiet_NaN())));
  // u (1 - 2 r) for a cap of 30 is exactly 30 once r is that small.
  EXPECT_EQ(std::fmaf(-60.f, poly_tanh_rcp(1000.f), 30.f), 30.f);
}
