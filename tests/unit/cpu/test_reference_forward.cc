// Forward of the CPU reference against the dense formula of reference_test_util.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "reference_test_util.h"

namespace flexattn::cpu {
namespace {

using testing::dense_forward;
using testing::make_block_mask;
using testing::random_tensor;
using testing::values;

struct Shape {
  int64_t B, Hq, L, D, Bkv, Hkv, S, Dv;
};

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << "[" << i << "]";
    } else {
      EXPECT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << what << "[" << i << "]";
    }
  }
}

void check_against_dense(const Shape& s, const ModFns& m, const Options& o, DType dtype = DType::F64) {
  const HostTensor q = random_tensor({s.B, s.Hq, s.L, s.D}, 1, dtype, -2, 2);
  const HostTensor k = random_tensor({s.Bkv, s.Hkv, s.S, s.D}, 2, dtype, -2, 2);
  const HostTensor v = random_tensor({s.Bkv, s.Hkv, s.S, s.Dv}, 3, dtype);
  const ForwardResult r = forward(q, k, v, m, o);
  const double scale = std::isnan(o.scale) ? 1.0 / std::sqrt(double(s.D)) : o.scale;
  const testing::Dense d = dense_forward(q, k, v, m, scale, o.block_mask);
  ASSERT_EQ(r.out.dtype, DType::F64);
  EXPECT_EQ(r.out.shape, (std::vector<int64_t>{s.B, s.Hq, s.L, s.Dv}));
  EXPECT_EQ(r.lse.shape, (std::vector<int64_t>{s.B, s.Hq, s.L}));
  EXPECT_EQ(r.max_score.shape, (std::vector<int64_t>{s.B, s.Hq, s.L}));
  expect_near_all(values(r.out), d.out, 1e-12, "out");
  expect_near_all(values(r.lse), d.lse, 1e-12, "lse");
  expect_near_all(values(r.max_score), d.max, 1e-12, "max");
}

TEST(ReferenceForward, DenseMatchesFormulaAcrossLengths) {
  for (int64_t L : {1, 17, 129})
    for (int64_t S : {1, 17, 129}) {
      SCOPED_TRACE("L=" + std::to_string(L) + " S=" + std::to_string(S));
      check_against_dense({1, 2, L, 8, 1, 2, S, 8}, {}, {});
    }
}

TEST(ReferenceForward, GqaBroadcastAndDvDiffersFromD) {
  ModFns m;
  m.score_mod = [](double s, int64_t b, int64_t h, int64_t q, int64_t kv) { return s + 0.1 * h - 0.01 * b; };
  m.mask_mod = [](int64_t b, int64_t h, int64_t q, int64_t kv) { return kv <= q + b; };
  check_against_dense({3, 6, 17, 5, 3, 2, 19, 7}, m, {});  // GQA groups of 3
  check_against_dense({3, 4, 17, 5, 1, 1, 19, 3}, m, {});  // K/V broadcast over batch, MQA
  Options o;
  o.scale = 0.37;
  check_against_dense({2, 4, 9, 6, 1, 2, 11, 2}, m, o);
}

TEST(ReferenceForward, LowPrecisionInputsAreReadExactly) {
  ModFns m;
  m.score_mod = [](double s, int64_t, int64_t, int64_t, int64_t) { return 3.0 * std::tanh(s / 3.0); };
  for (DType t : {DType::F16, DType::BF16, DType::F32}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    check_against_dense({2, 2, 17, 16, 2, 1, 13, 8}, m, {}, t);
  }
}

TEST(ReferenceForward, FullyMaskedRowsGiveZeroOutAndMinusInfLse) {
  ModFns m;
  // Rows q % 3 == 0 see nothing; score_mod yields NaN exactly where masked, which must be discarded.
  m.mask_mod = [](int64_t, int64_t, int64_t q, int64_t kv) { return q % 3 != 0 && kv <= q; };
  m.score_mod = [](double s, int64_t, int64_t, int64_t q, int64_t kv) {
    return (q % 3 == 0 || kv > q) ? NAN : s;
  };
  const HostTensor q = random_tensor({1, 2, 10, 4}, 4), k = random_tensor({1, 2, 10, 4}, 5),
                   v = random_tensor({1, 2, 10, 4}, 6);
  const ForwardResult r = forward(q, k, v, m, {});
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 10; ++i) {
      const int64_t row = h * 10 + i;
      if (i % 3 == 0) {
        EXPECT_EQ(r.lse.get(row), -INFINITY);
        EXPECT_EQ(r.max_score.get(row), -INFINITY);
        for (int64_t d = 0; d < 4; ++d) EXPECT_EQ(r.out.get(row * 4 + d), 0.0);
      } else {
        EXPECT_TRUE(std::isfinite(r.lse.get(row)));
        for (int64_t d = 0; d < 4; ++d) EXPECT_TRUE(std::isfinite(r.out.get(row * 4 + d)));
      }
    }
  check_against_dense({1, 2, 10, 4, 1, 2, 10, 4}, m, {});
}

TEST(ReferenceForward, EmptyKvIsFullyMasked) {
  const HostTensor q = random_tensor({1, 1, 3, 4}, 1), k = random_tensor({1, 1, 0, 4}, 2),
                   v = random_tensor({1, 1, 0, 5}, 3);
  const ForwardResult r = forward(q, k, v, {}, {});
  EXPECT_EQ(r.out.shape, (std::vector<int64_t>{1, 1, 3, 5}));
  for (int64_t i = 0; i < 15; ++i) EXPECT_EQ(r.out.get(i), 0.0);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(r.lse.get(i), -INFINITY);
}

TEST(ReferenceForward, NanAndInfScoresPropagateLikeTorch) {
  ModFns m;
  m.score_mod = [](double s, int64_t, int64_t, int64_t q, int64_t kv) {
    if (q == 1 && kv == 2) return double(NAN);
    if (q == 2 && kv == 0) return double(INFINITY);
    return s;
  };
  const HostTensor q = random_tensor({1, 1, 4, 4}, 1), k = random_tensor({1, 1, 5, 4}, 2),
                   v = random_tensor({1, 1, 5, 3}, 3);
  const ForwardResult r = forward(q, k, v, m, {});
  EXPECT_TRUE(std::isnan(r.lse.get(1)));
  EXPECT_TRUE(std::isnan(r.max_score.get(1)));
  EXPECT_EQ(r.lse.get(2), INFINITY);
  EXPECT_EQ(r.max_score.get(2), INFINITY);
  for (int64_t d = 0; d < 3; ++d) {
    EXPECT_TRUE(std::isnan(r.out.get(1 * 3 + d)));
    EXPECT_TRUE(std::isnan(r.out.get(2 * 3 + d)));
    EXPECT_TRUE(std::isfinite(r.out.get(0 * 3 + d)));
    EXPECT_TRUE(std::isfinite(r.out.get(3 * 3 + d)));
  }
}

TEST(ReferenceForward, BlockMaskFullBlocksSkipMaskMod) {
  // L=S=10 with 4x3 blocks: nq=3, nkv=4; per head a different pattern of skipped/partial/full blocks.
  const std::vector<int> states = {
      // h = 0
      2, 1, 0, 0,  //
      1, 2, 1, 0,  //
      0, 0, 1, 2,  //
      // h = 1
      1, 1, 1, 1,  //
      0, 0, 0, 0,  // a whole block row skipped: fully masked rows
      2, 2, 2, 2,  //
  };
  const BlockMask bm = make_block_mask(1, 2, 10, 10, 4, 3, states);
  ModFns m;
  // mask_mod is false at even (q + kv): inside full blocks those entries must still be attended.
  m.mask_mod = [](int64_t, int64_t, int64_t q, int64_t kv) { return (q + kv) % 2 == 1; };
  Options o;
  o.block_mask = &bm;
  check_against_dense({2, 2, 10, 4, 2, 2, 10, 3}, m, o);  // B_mask = 1 broadcast over batch 2

  const HostTensor q = random_tensor({2, 2, 10, 4}, 1), k = random_tensor({2, 2, 10, 4}, 2),
                   v = random_tensor({2, 2, 10, 3}, 3);
  const ForwardResult r = forward(q, k, v, m, o);
  // Row 0 of head 0 sees block (0,0) (full: kv 0..2, mask_mod ignored although it rejects kv 0 and 2)
  // and block (0,1) (partial: kv 3..5, mask_mod keeps the odd ones, 3 and 5).
  const std::vector<int64_t> keys = {0, 1, 2, 3, 5};
  double mx = -INFINITY, sc[10];
  for (int64_t j : keys) {
    double s = 0;
    for (int d = 0; d < 4; ++d) s += q.get(d) * k.get(j * 4 + d);
    sc[j] = s / 2.0;
    mx = std::max(mx, sc[j]);
  }
  double sum = 0;
  for (int64_t j : keys) sum += std::exp(sc[j] - mx);
  EXPECT_NEAR(r.lse.get(0), mx + std::log(sum), 1e-13);
  // Head 1, block row 1 (rows 4..7) is skipped entirely.
  for (int64_t i = 4; i < 8; ++i) EXPECT_EQ(r.lse.get(10 + i), -INFINITY);
  for (int64_t i = 8; i < 10; ++i) EXPECT_TRUE(std::isfinite(r.lse.get(10 + i)));
}

TEST(ReferenceForward, BlockMaskPerBatchAndHeadIndexing) {
  // B_mask = B = 2, H_mask = 1 (broadcast over 3 heads): batch 1 skips everything past block 0.
  std::vector<int> states = {1, 1, 1, 1, 1, 1, 1, 1, 1, /* b=1 */ 1, 0, 0, 1, 0, 0, 2, 0, 0};
  const BlockMask bm = make_block_mask(2, 1, 9, 7, 3, 3, states);
  ModFns m;
  m.mask_mod = [](int64_t b, int64_t h, int64_t q, int64_t kv) { return (q * 7 + kv + h) % 5 != 0; };
  Options o;
  o.block_mask = &bm;
  check_against_dense({2, 3, 9, 4, 1, 3, 7, 2}, m, o);
}

TEST(ReferenceForward, DeterministicAcrossThreadCounts) {
  ModFns m;
  m.score_mod = [](double s, int64_t, int64_t h, int64_t q, int64_t kv) { return s - 0.05 * std::abs(q - kv); };
  m.mask_mod = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; };
  const HostTensor q = random_tensor({2, 4, 67, 8}, 1), k = random_tensor({2, 2, 67, 8}, 2),
                   v = random_tensor({2, 2, 67, 8}, 3);
  Options o;
  o.threads = 1;
  const ForwardResult ref = forward(q, k, v, m, o);
  for (int t : {2, 3, 7, 0}) {
    o.threads = t;
    const ForwardResult r = forward(q, k, v, m, o);
    EXPECT_EQ(r.out.bytes, ref.out.bytes) << "threads=" << t;
    EXPECT_EQ(r.lse.bytes, ref.lse.bytes) << "threads=" << t;
    EXPECT_EQ(r.max_score.bytes, ref.max_score.bytes) << "threads=" << t;
  }
}

TEST(ReferenceForward, ExceptionsFromModsReachTheCaller) {
  ModFns m;
  m.mask_mod = [](int64_t, int64_t, int64_t q, int64_t) -> bool {
    if (q == 40) throw Error("boom");
    return true;
  };
  const HostTensor q = random_tensor({1, 2, 64, 4}, 1), k = random_tensor({1, 2, 8, 4}, 2);
  Options o;
  o.threads = 4;
  EXPECT_THROW(forward(q, k, k, m, o), Error);
}

}  // namespace
}  // namespace flexattn::cpu
