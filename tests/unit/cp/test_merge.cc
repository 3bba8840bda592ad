// merge_attention and its backward on hand-made partials: edge rows (fully masked, +inf, NaN, huge
// lse), algebraic properties, and the backward against finite differences of the merge itself.
#include <gtest/gtest.h>

#include <limits>

#include "cp_test_util.h"

namespace {

using namespace cp_test;
using flexattn::cp::merge_attention;
using flexattn::cp::merge_attention_backward;
using flexattn::cp::Merged;
using flexattn::cp::MergeGrads;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One row (B = H = L = 1) per partial: out = values, lse = lse.
HostTensor row_out(std::vector<double> values) {
  HostTensor t(DType::F64, {1, 1, 1, int64_t(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.set(int64_t(i), values[i]);
  return t;
}
HostTensor row_lse(double lse) {
  HostTensor t(DType::F64, {1, 1, 1});
  t.set(0, lse);
  return t;
}

TEST(Merge, TwoPartialsByHand) {
  // lse 0 and log 3: weights 1/4 and 3/4, lse log 4.
  const Merged m = merge_attention({row_out({1, 0}), row_out({0, 2})}, {row_lse(0), row_lse(std::log(3.0))});
  EXPECT_NEAR(m.lse.get(0), std::log(4.0), 1e-15);
  EXPECT_NEAR(m.out.get(0), 0.25, 1e-15);
  EXPECT_NEAR(m.out.get(1), 1.5, 1e-15);
}

TEST(Merge, HugeLseDoesNotOverflow) {
  // exp(1000) overflows a double; the max-shift must keep this exact (to the rounding of the input
  // 1000 − log 3, whose ulp is 1.1e-13).
  const Merged m = merge_attention({row_out({1}), row_out({3})}, {row_lse(1000), row_lse(1000 - std::log(3.0))});
  EXPECT_NEAR(m.lse.get(0), 1000 + std::log(4.0 / 3.0), 1e-12);
  EXPECT_NEAR(m.out.get(0), 0.75 * 1 + 0.25 * 3, 1e-12);
  const Merged tiny = merge_attention({row_out({1}), row_out({3})}, {row_lse(-1000), row_lse(-1000)});
  EXPECT_NEAR(tiny.lse.get(0), -1000 + std::log(2.0), 1e-12);
  EXPECT_NEAR(tiny.out.get(0), 2.0, 1e-14);
}

TEST(Merge, FullyMaskedRowsGiveZeroOutAndMinusInfLse) {
  // The skipped partial's out is garbage (NaN): it must not leak into the result.
  const Merged a = merge_attention({row_out({kNaN, 5}), row_out({7, 8})}, {row_lse(-kInf), row_lse(0.5)});
  EXPECT_EQ(a.lse.get(0), 0.5);
  EXPECT_EQ(a.out.get(0), 7);
  EXPECT_EQ(a.out.get(1), 8);
  const Merged b = merge_attention({row_out({kNaN, 5}), row_out({1, 2})}, {row_lse(-kInf), row_lse(-kInf)});
  EXPECT_EQ(b.lse.get(0), -kInf);
  EXPECT_EQ(b.out.get(0), 0.0);
  EXPECT_EQ(b.out.get(1), 0.0);
  const MergeGrads g = merge_attention_backward({row_out({kNaN, 5}), row_out({1, 2})}, {row_lse(-kInf), row_lse(-kInf)},
                                                row_out({1, 1}), nullptr);
  for (int i = 0; i < 2; ++i) {
    EXPECT_FALSE(any_nan(g.douts[size_t(i)]) || any_nan(g.dlses[size_t(i)])) << i;
    EXPECT_EQ(g.douts[size_t(i)].get(0), 0.0);
    EXPECT_EQ(g.dlses[size_t(i)].get(0), 0.0);
  }
}

TEST(Merge, InfiniteAndNanLseMatchTheUnsplitOracle) {
  // The oracle gives lse = +inf and NaN out for a row with a +inf score, NaN for a NaN score.
  const Merged inf = merge_attention({row_out({1}), row_out({2})}, {row_lse(kInf), row_lse(0)});
  EXPECT_EQ(inf.lse.get(0), kInf);
  EXPECT_TRUE(std::isnan(inf.out.get(0)));
  const Merged nan = merge_attention({row_out({1}), row_out({2})}, {row_lse(kNaN), row_lse(0)});
  EXPECT_TRUE(std::isnan(nan.lse.get(0)));
  EXPECT_TRUE(std::isnan(nan.out.get(0)));
  const MergeGrads g = merge_attention_backward({row_out({1}), row_out({2})}, {row_lse(kNaN), row_lse(0)},
                                                row_out({1}), nullptr);
  EXPECT_TRUE(std::isnan(g.douts[1].get(0)));
}

TEST(Merge, SinglePartialIsIdentityAndDtypesAreRead) {
  const HostTensor out = random_tensor({2, 3, 5, 4}, 1, DType::BF16);
  HostTensor lse = random_tensor({2, 3, 5}, 2, DType::F32);
  lse.set(3, -kInf);
  HostTensor out0 = out;
  for (int64_t c = 0; c < 4; ++c) out0.set(3 * 4 + c, 0.0);  // a fully masked row has out 0
  const Merged m = merge_attention({out0}, {lse});
  expect_close(m.out, out0, 0, "out");
  expect_close(m.lse, lse, 0, "lse");
}

TEST(Merge, IsAssociativeAndOrderFree) {
  std::vector<HostTensor> outs, lses;
  for (int i = 0; i < 3; ++i) {
    outs.push_back(random_tensor({2, 2, 6, 3}, 10 + i));
    lses.push_back(random_tensor({2, 2, 6}, 20 + i));
  }
  lses[1].set(4, -kInf);
  const Merged all = merge_attention(outs, lses);
  const Merged ab = merge_attention({outs[0], outs[1]}, {lses[0], lses[1]});
  const Merged ab_c = merge_attention({ab.out, outs[2]}, {ab.lse, lses[2]});
  const Merged cba = merge_attention({outs[2], outs[1], outs[0]}, {lses[2], lses[1], lses[0]});
  expect_close(ab_c.out, all.out, 1e-14, "out (ab)c");
  expect_close(ab_c.lse, all.lse, 1e-14, "lse (ab)c");
  expect_close(cba.out, all.out, 1e-14, "out cba");
  expect_close(cba.lse, all.lse, 1e-14, "lse cba");
}

// loss = Σ out·dout + Σ lse·dlse over rows with finite lse.
double merge_loss(const std::vector<HostTensor>& outs, const std::vector<HostTensor>& lses, const HostTensor& dout,
                  const HostTensor& dlse) {
  const Merged m = merge_attention(outs, lses);
  double l = 0;
  for (int64_t i = 0; i < m.out.numel(); ++i) l += m.out.get(i) * dout.get(i);
  for (int64_t i = 0; i < m.lse.numel(); ++i)
    if (std::isfinite(m.lse.get(i))) l += m.lse.get(i) * dlse.get(i);
  return l;
}

TEST(MergeBackward, MatchesFiniteDifferences) {
  std::vector<HostTensor> outs, lses;
  for (int i = 0; i < 3; ++i) {
    outs.push_back(random_tensor({1, 2, 4, 3}, 30 + i));
    lses.push_back(random_tensor({1, 2, 4}, 40 + i));
  }
  lses[0].set(2, -kInf);  // a partial that saw nothing in row 2
  for (auto& l : lses) l.set(5, -kInf);  // a row nobody saw
  const HostTensor dout = random_tensor({1, 2, 4, 3}, 50), dlse = random_tensor({1, 2, 4}, 51);
  const MergeGrads g = merge_attention_backward(outs, lses, dout, &dlse);
  const double h = 1e-6;
  for (size_t p = 0; p < outs.size(); ++p) {
    for (int64_t i = 0; i < outs[p].numel(); ++i) {
      const double lse_row = lses[p].get(i / 3);
      if (lse_row == -kInf) {  // out_i is ignored there: exactly zero gradient
        EXPECT_EQ(g.douts[p].get(i), 0.0);
        continue;
      }
      const double x = outs[p].get(i);
      outs[p].set(i, x + h);
      const double up = merge_loss(outs, lses, dout, dlse);
      outs[p].set(i, x - h);
      const double down = merge_loss(outs, lses, dout, dlse);
      outs[p].set(i, x);
      EXPECT_NEAR(g.douts[p].get(i), (up - down) / (2 * h), 1e-8) << "dout " << p << " " << i;
    }
    for (int64_t i = 0; i < lses[p].numel(); ++i) {
      const double x = lses[p].get(i);
      if (x == -kInf) {
        EXPECT_EQ(g.dlses[p].get(i), 0.0);
        continue;
      }
      lses[p].set(i, x + h);
      const double up = merge_loss(outs, lses, dout, dlse);
      lses[p].set(i, x - h);
      const double down = merge_loss(outs, lses, dout, dlse);
      lses[p].set(i, x);
      EXPECT_NEAR(g.dlses[p].get(i), (up - down) / (2 * h), 1e-8) << "dlse " << p << " " << i;
    }
  }
}

TEST(MergeBackward, WithoutDlseEqualsZeroDlse) {
  std::vector<HostTensor> outs{random_tensor({1, 1, 3, 2}, 60), random_tensor({1, 1, 3, 2}, 61)};
  std::vector<HostTensor> lses{random_tensor({1, 1, 3}, 62), random_tensor({1, 1, 3}, 63)};
  const HostTensor dout = random_tensor({1, 1, 3, 2}, 64);
  const HostTensor zero(DType::F64, {1, 1, 3});
  const MergeGrads a = merge_attention_backward(outs, lses, dout, nullptr);
  const MergeGrads b = merge_attention_backward(outs, lses, dout, &zero);
  for (int p = 0; p < 2; ++p) {
    expect_close(a.douts[size_t(p)], b.douts[size_t(p)], 0, "dout");
    expect_close(a.dlses[size_t(p)], b.dlses[size_t(p)], 0, "dlse");
  }
}

}  // namespace
