#pragma once
// Helpers for the context-parallel tests: random tensors, the masks the tests sweep (causal, sliding
// window, documents, ...), score mods with their gradients, and closeness checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "flexattn/cp.h"
#include "flexattn/reference.h"

namespace cp_test {

using flexattn::BlockMask;
using flexattn::DType;
using flexattn::HostTensor;
using flexattn::cpu::ModFns;
namespace cpu = flexattn::cpu;

inline HostTensor random_tensor(std::vector<int64_t> shape, uint64_t seed, DType dtype = DType::F64) {
  HostTensor t(dtype, std::move(shape));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, u(rng));
  return t;
}

using Mask = std::function<bool(int64_t b, int64_t h, int64_t q, int64_t kv)>;

struct NamedMask {
  std::string name;
  Mask fn;
};

// Document ids for `len` positions: documents of the given lengths, repeated.
inline std::vector<int> doc_ids(int64_t len, const std::vector<int>& lengths) {
  std::vector<int> ids;
  for (int d = 0; int64_t(ids.size()) < len; ++d)
    for (int i = 0; i < lengths[size_t(d) % lengths.size()] && int64_t(ids.size()) < len; ++i) ids.push_back(d);
  return ids;
}

// Self-attention masks (q and kv index the same sequence of length `len`).
inline std::vector<NamedMask> self_masks(int64_t len) {
  const std::vector<int> doc = doc_ids(len, {7, 13, 3, 11});
  return {
      {"causal", [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; }},
      // Head-dependent window, so per-head masks are exercised: 5 or 9 positions back.
      {"sliding_window",
       [](int64_t, int64_t h, int64_t q, int64_t kv) { return kv <= q && q - kv < (h % 2 ? 9 : 5); }},
      {"document_causal",
       [doc](int64_t, int64_t, int64_t q, int64_t kv) { return doc[size_t(q)] == doc[size_t(kv)] && kv <= q; }},
      {"document", [doc](int64_t, int64_t, int64_t q, int64_t kv) { return doc[size_t(q)] == doc[size_t(kv)]; }},
      // The first rows attend nothing: fully masked rows in some pieces and in the whole.
      {"shifted_causal", [](int64_t, int64_t, int64_t q, int64_t kv) { return kv + 4 <= q; }},
  };
}

// score_mod = c·tanh(s/c) + 0.05·h − 0.01·(q − kv): depends on absolute positions (offsets must be right).
inline ModFns softcap_mods(const Mask& mask) {
  ModFns m;
  m.mask_mod = mask;
  m.score_mod = [](double s, int64_t, int64_t h, int64_t q, int64_t kv) {
    return 2.0 * std::tanh(s / 2.0) + 0.05 * double(h) - 0.01 * double(q - kv);
  };
  m.score_grad = [](double s, int64_t, int64_t, int64_t, int64_t, double g) {
    const double t = std::tanh(s / 2.0);
    return g * (1.0 - t * t);
  };
  return m;
}

inline double rel_err(double got, double want) { return std::fabs(got - want) / (1.0 + std::fabs(want)); }

// got == want elementwise: equal infinities, both NaN, or within tol relative.
inline void expect_close(const HostTensor& got, const HostTensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape, want.shape) << what;
  int bad = 0;
  for (int64_t i = 0; i < want.numel() && bad < 5; ++i) {
    const double g = got.get(i), w = want.get(i);
    const bool ok = std::isnan(w) ? std::isnan(g) : std::isinf(w) ? g == w : rel_err(g, w) <= tol;
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << "[" << i << "]: got " << g << ", want " << w;
    }
  }
}

// A split run's forward (out, lse) against the unsplit oracle's, each within tol relative.
inline void expect_forward_close(const HostTensor& out, const HostTensor& lse, const cpu::ForwardResult& want,
                                 double tol, const std::string& what) {
  expect_close(out, want.out, tol, what + " out");
  expect_close(lse, want.lse, tol, what + " lse");
}

// A split run's gradients (dq, dk, dv) against the unsplit oracle's, each within tol relative.
inline void expect_grads_close(const HostTensor& dq, const HostTensor& dk, const HostTensor& dv,
                               const cpu::BackwardResult& want, double tol, const std::string& what) {
  expect_close(dq, want.dq, tol, what + " dq");
  expect_close(dk, want.dk, tol, what + " dk");
  expect_close(dv, want.dv, tol, what + " dv");
}

inline bool any_nan(const HostTensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (std::isnan(t.get(i))) return true;
  return false;
}

// A whole (unsplit) problem over a block mask with random inputs (B 2, Hq 4, Hkv 2, D 8, Dv 5) and the
// oracle's forward and backward on it: what every split execution is compared with.
struct WholeProblem {
  HostTensor q, k, v, dout, dlse;
  cpu::ForwardResult want;
  cpu::BackwardResult want_g;
};
inline WholeProblem whole_problem(const BlockMask& bm, const ModFns& mods, uint64_t seed) {
  const int64_t L = bm.q_len, S = bm.kv_len;
  WholeProblem w;
  w.q = random_tensor({2, 4, L, 8}, seed), w.k = random_tensor({2, 2, S, 8}, seed + 1);
  w.v = random_tensor({2, 2, S, 5}, seed + 2), w.dout = random_tensor({2, 4, L, 5}, seed + 3);
  w.dlse = random_tensor({2, 4, L}, seed + 4);
  cpu::Options whole;
  whole.block_mask = &bm;
  whole.threads = 2;
  w.want = cpu::forward(w.q, w.k, w.v, mods, whole);
  w.want_g = cpu::backward(w.q, w.k, w.v, w.dout, &w.dlse, mods, whole);
  return w;
}

}  // namespace cp_test
