// kernels/common/poly_rcp.cuh as host C++: the FMA-pipe reciprocal the sm90 softcap path may use
// (FLEXATTN_SM90_SOFTCAP_RCP) must be within 1 ulp of 1 / y, as rcp.approx is, over the range the softcap feeds
// it ([1, 2^64 + 1]), and 1 / (2^t + 1) must agree with the MUFU form (mod_ops.cuh fa_tanh_rcp) and keep its
// ends: 1 at t = -inf, 0 in effect for large t, NaN for NaN. (Host builds: exp2 and the NaN-keeping min are C++
// stand-ins for ex2.approx and min.NaN; the compile tier checks the device's instructions.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "common/mod_ops.cuh"
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

// Against mod_ops.cuh's fa_tanh_rcp (the MUFU form's formula, 1 / (2^t + 1) in f32), over the softcap's range and
// its ends: equal to 1.5e-7 relative below the clamp; past it the two differ by less than 2^-64 absolute, below
// half an ulp of anything softcap adds r to.
TEST(PolyRcpHost, TanhReciprocalMatchesTheMufuForm) {
  double worst = 0;
  float at = 0;
  for (int i = 0; i <= 400000; ++i) {
    const float t = float(-1000.0 + 2000.0 * i / 400000.0);
    const double want = fa_tanh_rcp(t), got = poly_tanh_rcp(t);
    if (t <= 64.f) {
      const double err = std::fabs(got - want) / want;
      if (err > worst) worst = err, at = t;
    } else {
      EXPECT_LE(std::fabs(got - want), std::ldexp(1.0, -64)) << t;
    }
  }
  EXPECT_LT(worst, 1.5e-7) << "at t = " << at;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(poly_tanh_rcp(-inf), fa_tanh_rcp(-inf));
  EXPECT_EQ(poly_tanh_rcp(0.f), 0.5f);
  EXPECT_TRUE(std::isnan(poly_tanh_rcp(nan)));
  EXPECT_TRUE(std::isnan(fa_tanh_rcp(nan)));
  EXPECT_EQ(fa_tanh_rcp(inf), 0.f);
  EXPECT_GT(poly_tanh_rcp(inf), 0.f);
  EXPECT_LE(poly_tanh_rcp(inf), std::ldexp(1.f, -64));
  // A softcap score from either form: u (1 - 2 r) with the folded constants of fwd_softmax_sm90.cuh, identical
  // for a cap of 30 wherever r is below 2^-30 (t > ~30) and within an ulp of 30 elsewhere.
  for (float t : {-20.f, -1.f, 0.f, 0.5f, 3.f, 20.f, 40.f, 100.f, 1000.f}) {
    const float a = std::fmaf(-60.f, poly_tanh_rcp(t), 30.f), b = std::fmaf(-60.f, fa_tanh_rcp(t), 30.f);
    EXPECT_NEAR(a, b, 4e-6f) << t;
    if (t >= 40.f) {
      EXPECT_EQ(a, b) << t;
    }
  }
}
