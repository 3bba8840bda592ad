// Backward of the CPU reference against central finite differences (in double) of
//   loss = Σ out∘dout + Σ lse∘dlse   (rows with lse = -inf contribute nothing)
// for q, k, v and for score_mod parameters whose gradients arrive through buffer_grad.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>

#include "reference_test_util.h"

namespace flexattn::cpu {
namespace {

using testing::make_block_mask;
using testing::random_tensor;

double loss(const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor& dout,
            const HostTensor* dlse, const ModFns& m, const Options& o) {
  const ForwardResult r = forward(q, k, v, m, o);
  double l = 0;
  for (int64_t i = 0; i < r.out.numel(); ++i) l += r.out.get(i) * dout.get(i);
  if (dlse)
    for (int64_t i = 0; i < r.lse.numel(); ++i)
      if (r.lse.get(i) != -INFINITY) l += r.lse.get(i) * dlse->get(i);
  return l;
}

constexpr double kStep = 1e-5;

void expect_grad(double analytic, double numeric, const std::string& what) {
  EXPECT_NEAR(analytic, numeric, 1e-7 * (1.0 + std::fabs(numeric))) << what;
}

// Checks grad (analytic) of every element of `x` against central differences of f(x).
void check_tensor_grad(HostTensor* x, const HostTensor& grad, const std::function<double()>& f, const char* name) {
  ASSERT_EQ(grad.shape, x->shape) << name;
  for (int64_t i = 0; i < x->numel(); ++i) {
    const double x0 = x->get(i);
    x->set(i, x0 + kStep);
    const double up = f();
    x->set(i, x0 - kStep);
    const double down = f();
    x->set(i, x0);
    expect_grad(grad.get(i), (up - down) / (2 * kStep), std::string(name) + "[" + std::to_string(i) + "]");
  }
}

struct Case {
  int64_t B, Hq, L, D, Bkv, Hkv, S, Dv;
  bool with_dlse;
};

void check_qkv_grads(const Case& c, const ModFns& m, Options o) {
  HostTensor q = random_tensor({c.B, c.Hq, c.L, c.D}, 11);
  HostTensor k = random_tensor({c.Bkv, c.Hkv, c.S, c.D}, 12);
  HostTensor v = random_tensor({c.Bkv, c.Hkv, c.S, c.Dv}, 13);
  const HostTensor dout = random_tensor({c.B, c.Hq, c.L, c.Dv}, 14);
  const HostTensor dlse = random_tensor({c.B, c.Hq, c.L}, 15);
  const HostTensor* dl = c.with_dlse ? &dlse : nullptr;
  o.threads = 2;
  const BackwardResult g = backward(q, k, v, dout, dl, m, o);
  o.threads = 1;
  auto f = [&] { return loss(q, k, v, dout, dl, m, o); };
  check_tensor_grad(&q, g.dq, f, "dq");
  check_tensor_grad(&k, g.dk, f, "dk");
  check_tensor_grad(&v, g.dv, f, "dv");
}

TEST(ReferenceBackward, DenseGqaMatchesFiniteDifferences) {
  check_qkv_grads({2, 4, 7, 3, 2, 2, 9, 5, false}, {}, {});
  check_qkv_grads({2, 4, 7, 3, 2, 2, 9, 5, true}, {}, {});
}

// score_mod = w[h] · c·tanh(s/c) + bias[h], with gradients for w and bias through buffer_grad.
struct SoftcapBias {
  double c = 2.0;
  std::vector<double> w = {0.7, 1.3, -0.4, 1.1}, bias = {0.2, -0.5, 0.9, 0.0};
  std::vector<std::vector<double>> dw, dbias;  // per thread

  ModFns fns() {
    ModFns m;
    m.score_mod = [this](double s, int64_t, int64_t h, int64_t, int64_t) {
      return w[size_t(h)] * c * std::tanh(s / c) + bias[size_t(h)];
    };
    m.score_grad = [this](double s, int64_t, int64_t h, int64_t, int64_t, double g) {
      const double t = std::tanh(s / c);
      return g * w[size_t(h)] * (1 - t * t);
    };
    m.buffer_grad = [this](int thread, double s, int64_t, int64_t h, int64_t, int64_t, double g) {
      dw[size_t(thread)][size_t(h)] += g * c * std::tanh(s / c);
      dbias[size_t(thread)][size_t(h)] += g;
    };
    return m;
  }
  void reset(int threads) {
    dw.assign(size_t(threads), std::vector<double>(w.size(), 0.0));
    dbias.assign(size_t(threads), std::vector<double>(w.size(), 0.0));
  }
  static double total(const std::vector<std::vector<double>>& per_thread, size_t h) {
    double s = 0;
    for (const auto& t : per_thread) s += t[h];
    return s;
  }
};

TEST(ReferenceBackward, ModsMasksBlockMaskBroadcastMatchFiniteDifferences) {
  SoftcapBias sb;
  ModFns m = sb.fns();
  m.mask_mod = [](int64_t b, int64_t, int64_t q, int64_t kv) { return q % 4 != 3 && (kv <= q + 2 + b); };
  // q_len 9, kv_len 10, blocks 4x4 -> nq 3, nkv 3; B_mask 2 (per batch), H_mask 1. Row 3 of batch 1 is
  // fully masked (no full block in its block row); rows 3 and 7 of batch 0 attend their full blocks.
  const std::vector<int> states = {2, 1, 0, 1, 2, 1, 0, 1, 1, /* b=1 */ 1, 1, 0, 2, 0, 1, 1, 1, 2};
  const BlockMask bm = make_block_mask(2, 1, 9, 10, 4, 4, states);
  Options o;
  o.block_mask = &bm;
  o.scale = 0.8;
  sb.reset(2);
  check_qkv_grads({2, 4, 9, 3, 1, 2, 10, 4, true}, m, o);  // K/V batch broadcast, GQA groups of 2

  // Captured-buffer gradients: dw, dbias from buffer_grad against finite differences.
  HostTensor q = random_tensor({2, 4, 9, 3}, 21), k = random_tensor({1, 2, 10, 3}, 22),
             v = random_tensor({1, 2, 10, 4}, 23), dout = random_tensor({2, 4, 9, 4}, 24),
             dlse = random_tensor({2, 4, 9}, 25);
  o.threads = 3;
  sb.reset(resolve_threads(o.threads));
  const BackwardResult g = backward(q, k, v, dout, &dlse, m, o);
  for (int64_t i = 0; i < g.dq.numel(); ++i) ASSERT_TRUE(std::isfinite(g.dq.get(i)));
  for (int64_t i = 0; i < g.dk.numel(); ++i) ASSERT_TRUE(std::isfinite(g.dk.get(i)));
  for (int64_t i = 0; i < g.dv.numel(); ++i) ASSERT_TRUE(std::isfinite(g.dv.get(i)));
  const auto dw = sb.dw, dbias = sb.dbias;
  o.threads = 1;
  for (size_t h = 0; h < 4; ++h) {
    for (std::vector<double>* param : {&sb.w, &sb.bias}) {
      const double x0 = (*param)[h];
      (*param)[h] = x0 + kStep;
      const double up = loss(q, k, v, dout, &dlse, m, o);
      (*param)[h] = x0 - kStep;
      const double down = loss(q, k, v, dout, &dlse, m, o);
      (*param)[h] = x0;
      const bool is_w = param == &sb.w;
      const double analytic = SoftcapBias::total(is_w ? dw : dbias, h);
      EXPECT_NE(analytic, 0.0);
      expect_grad(analytic, (up - down) / (2 * kStep), (is_w ? "dw[" : "dbias[") + std::to_string(h) + "]");
    }
  }
}

TEST(ReferenceBackward, MaskedEntriesAreDiscardedEvenWhenNan) {
  ModFns clean;
  clean.mask_mod = [](int64_t, int64_t, int64_t q, int64_t kv) { return q % 4 != 3 && kv <= q; };
  clean.score_mod = [](double s, int64_t, int64_t, int64_t q, int64_t kv) { return s * 1.5 - 0.1 * (q - kv); };
  clean.score_grad = [](double, int64_t, int64_t, int64_t, int64_t, double g) { return 1.5 * g; };
  ModFns poisoned = clean;
  poisoned.score_mod = [](double s, int64_t, int64_t, int64_t q, int64_t kv) {
    return q % 4 == 3 || kv > q ? NAN : s * 1.5 - 0.1 * (q - kv);
  };
  poisoned.score_grad = [](double, int64_t, int64_t, int64_t q, int64_t kv, double g) {
    return q % 4 == 3 || kv > q ? NAN : 1.5 * g;
  };
  const HostTensor q = random_tensor({1, 2, 9, 3}, 1), k = random_tensor({1, 2, 9, 3}, 2),
                   v = random_tensor({1, 2, 9, 3}, 3), dout = random_tensor({1, 2, 9, 3}, 4),
                   dlse = random_tensor({1, 2, 9}, 5);
  const BackwardResult a = backward(q, k, v, dout, &dlse, clean, {});
  const BackwardResult b = backward(q, k, v, dout, &dlse, poisoned, {});
  for (int64_t i = 0; i < b.dq.numel(); ++i) ASSERT_TRUE(std::isfinite(b.dq.get(i)));
  for (int64_t i = 0; i < b.dk.numel(); ++i) ASSERT_TRUE(std::isfinite(b.dk.get(i)));
  EXPECT_EQ(a.dq.bytes, b.dq.bytes);
  EXPECT_EQ(a.dk.bytes, b.dk.bytes);
  EXPECT_EQ(a.dv.bytes, b.dv.bytes);
  for (int64_t d = 0; d < 3; ++d) EXPECT_EQ(b.dq.get(3 * 3 + d), 0.0);  // fully masked row 3 of head 0
  check_qkv_grads({1, 2, 9, 3, 1, 2, 9, 3, true}, poisoned, {});
}

TEST(ReferenceBackward, BufferGradCalledOncePerKeptEntry) {
  const int64_t B = 2, H = 2, L = 6, S = 7;
  std::unique_ptr<std::atomic<int>[]> calls(new std::atomic<int>[B * H * L * S]);
  for (int64_t i = 0; i < B * H * L * S; ++i) calls[i] = 0;
  ModFns m;
  m.mask_mod = [](int64_t b, int64_t h, int64_t q, int64_t kv) { return (q + kv + b + h) % 3 != 0; };
  std::atomic<bool> bad_thread{false};
  Options o;
  o.threads = 3;
  m.buffer_grad = [&](int thread, double, int64_t b, int64_t h, int64_t q, int64_t kv, double) {
    if (thread < 0 || thread >= 3) bad_thread = true;
    ++calls[((b * H + h) * L + q) * S + kv];
  };
  const HostTensor q = random_tensor({B, H, L, 4}, 1), k = random_tensor({B, H, S, 4}, 2),
                   v = random_tensor({B, H, S, 4}, 3), dout = random_tensor({B, H, L, 4}, 4);
  backward(q, k, v, dout, nullptr, m, o);
  EXPECT_FALSE(bad_thread);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < S; ++j)
          EXPECT_EQ(calls[((b * H + h) * L + i) * S + j].load(), (i + j + b + h) % 3 != 0 ? 1 : 0);
}

TEST(ReferenceBackward, DeterministicAcrossThreadCounts) {
  SoftcapBias sb;
  ModFns m = sb.fns();
  m.buffer_grad = nullptr;
  m.mask_mod = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; };
  const HostTensor q = random_tensor({3, 4, 37, 8}, 1), k = random_tensor({1, 2, 41, 8}, 2),
                   v = random_tensor({1, 2, 41, 6}, 3), dout = random_tensor({3, 4, 37, 6}, 4),
                   dlse = random_tensor({3, 4, 37}, 5);
  Options o;
  o.threads = 1;
  const BackwardResult ref = backward(q, k, v, dout, &dlse, m, o);
  for (int t : {2, 3, 5, 0}) {
    o.threads = t;
    const BackwardResult g = backward(q, k, v, dout, &dlse, m, o);
    EXPECT_EQ(g.dq.bytes, ref.dq.bytes) << "threads=" << t;
    EXPECT_EQ(g.dk.bytes, ref.dk.bytes) << "threads=" << t;
    EXPECT_EQ(g.dv.bytes, ref.dv.bytes) << "threads=" << t;
  }
}

TEST(ReferenceBackward, NanAtAnUnmaskedEntryPropagatesToItsRow) {
  ModFns m;
  m.score_mod = [](double s, int64_t, int64_t, int64_t q, int64_t kv) { return q == 2 && kv == 1 ? NAN : s; };
  const HostTensor q = random_tensor({1, 1, 4, 3}, 1), k = random_tensor({1, 1, 5, 3}, 2),
                   v = random_tensor({1, 1, 5, 3}, 3), dout = random_tensor({1, 1, 4, 3}, 4);
  const BackwardResult g = backward(q, k, v, dout, nullptr, m, {});
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t d = 0; d < 3; ++d)
      EXPECT_EQ(std::isnan(g.dq.get(i * 3 + d)), i == 2) << "row " << i;
  EXPECT_TRUE(std::isnan(g.dv.get(0)));
}

TEST(ReferenceBackward, LowPrecisionInputsEqualTheirF64Values) {
  const HostTensor q = random_tensor({1, 2, 5, 4}, 1, DType::BF16), k = random_tensor({1, 1, 6, 4}, 2, DType::F16),
                   v = random_tensor({1, 1, 6, 3}, 3, DType::F32), dout = random_tensor({1, 2, 5, 3}, 4, DType::BF16);
  auto widen = [](const HostTensor& t) {
    HostTensor w(DType::F64, t.shape);
    for (int64_t i = 0; i < t.numel(); ++i) w.set(i, t.get(i));
    return w;
  };
  const BackwardResult a = backward(q, k, v, dout, nullptr, {}, {});
  const BackwardResult b = backward(widen(q), widen(k), widen(v), widen(dout), nullptr, {}, {});
  EXPECT_EQ(a.dq.bytes, b.dq.bytes);
  EXPECT_EQ(a.dk.bytes, b.dk.bytes);
  EXPECT_EQ(a.dv.bytes, b.dv.bytes);
}

}  // namespace
}  // namespace flexattn::cpu
