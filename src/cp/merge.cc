// Merging attention over disjoint KV subsets through their lse (forward and backward).
#include <cmath>
#include <limits>
#include <string>

#include "cp/shape_util.h"
#include "flexattn/cp.h"

namespace flexattn::cp {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Dims {
  int64_t B = 0, H = 0, L = 0, Dv = 0;
  int64_t rows() const { return B * H * L; }
};

Dims check_partials(const char* who, const std::vector<HostTensor>& outs, const std::vector<HostTensor>& lses) {
  const std::string w = std::string(who) + ": ";
  check(!outs.empty(), w + "outs must hold at least one partial result; got none");
  check(lses.size() == outs.size(), w + "lses must hold one lse per partial out (outs has " +
                                        std::to_string(outs.size()) + "); got " + std::to_string(lses.size()));
  detail::check_tensor(outs[0], w + "outs[0]", 4, "[B, H, L, Dv]");
  Dims d{outs[0].shape[0], outs[0].shape[1], outs[0].shape[2], outs[0].shape[3]};
  for (size_t i = 0; i < outs.size(); ++i) {
    const std::string oi = w + "outs[" + std::to_string(i) + "]", li = w + "lses[" + std::to_string(i) + "]";
    detail::check_tensor(outs[i], oi, 4, "[B, H, L, Dv]");
    check(outs[i].shape == outs[0].shape, oi + " must have the shape of outs[0] " +
                                              shape_string(outs[0].shape) + "; got " +
                                              shape_string(outs[i].shape));
    detail::check_tensor(lses[i], li, 3, "[B, H, L]");
    check(lses[i].shape == std::vector<int64_t>{d.B, d.H, d.L},
          li + " must have shape [B, H, L] = " + shape_string({d.B, d.H, d.L}) + " (outs without Dv); got " +
              shape_string(lses[i].shape));
  }
  return d;
}

// Per row: the merged lse and each partial's weight w_i = exp(lse_i − lse) (0 for skipped partials).
// Returns the merged lse; NaN or +inf when an input lse is, -inf when every partial is skipped.
double row_weights(const std::vector<HostTensor>& lses, int64_t row, std::vector<double>* w) {
  double m = -kInf;
  bool nan = false;
  for (const HostTensor& l : lses) {
    const double x = l.get(row);
    nan |= std::isnan(x);
    if (!std::isnan(x)) m = std::max(m, x);
  }
  w->assign(lses.size(), 0.0);
  if (nan) return kNaN;
  if (m == -kInf || m == kInf) return m;
  double sum = 0;
  for (size_t i = 0; i < lses.size(); ++i) {
    const double x = lses[i].get(row);
    if (x == -kInf) continue;
    (*w)[i] = std::exp(x - m);  // <= 1: the max-shift keeps every term finite
    sum += (*w)[i];
  }
  for (double& x : *w) x /= sum;  // sum >= 1 (the max partial contributes exp(0))
  return m + std::log(sum);
}

}  // namespace

Merged merge_attention(const std::vector<HostTensor>& outs, const std::vector<HostTensor>& lses) {
  const Dims d = check_partials("merge_attention", outs, lses);
  Merged r{HostTensor(DType::F64, {d.B, d.H, d.L, d.Dv}), HostTensor(DType::F64, {d.B, d.H, d.L})};
  std::vector<double> w;
  for (int64_t row = 0; row < d.rows(); ++row) {
    const double lse = row_weights(lses, row, &w);
    r.lse.set(row, lse);
    if (lse == -kInf) continue;  // out stays 0
    for (int64_t c = 0; c < d.Dv; ++c) {
      if (!std::isfinite(lse)) {
        r.out.set(row * d.Dv + c, kNaN);
        continue;
      }
      double acc = 0;
      for (size_t i = 0; i < outs.size(); ++i)
        if (w[i] != 0) acc += w[i] * outs[i].get(row * d.Dv + c);
      r.out.set(row * d.Dv + c, acc);
    }
  }
  return r;
}

MergeGrads merge_attention_backward(const std::vector<HostTensor>& outs, const std::vector<HostTensor>& lses,
                                    const HostTensor& dout, const HostTensor* dlse) {
  const Dims d = check_partials("merge_attention_backward", outs, lses);
  detail::check_tensor(dout, "merge_attention_backward: dout", 4, "[B, H, L, Dv]");
  check(dout.shape == outs[0].shape, "merge_attention_backward: dout must have the shape of outs[0] " +
                                         shape_string(outs[0].shape) + "; got " + shape_string(dout.shape));
  if (dlse) {
    detail::check_tensor(*dlse, "merge_attention_backward: dlse", 3, "[B, H, L]");
    check(dlse->shape == lses[0].shape, "merge_attention_backward: dlse must have the shape of lses[0] " +
                                            shape_string(lses[0].shape) + "; got " +
                                            shape_string(dlse->shape));
  }
  const Merged merged = merge_attention(outs, lses);
  MergeGrads g;
  for (size_t i = 0; i < outs.size(); ++i) {
    g.douts.emplace_back(DType::F64, outs[i].shape);
    g.dlses.emplace_back(DType::F64, lses[i].shape);
  }
  std::vector<double> w;
  for (int64_t row = 0; row < d.rows(); ++row) {
    const double lse = row_weights(lses, row, &w);
    if (lse == -kInf) continue;  // nothing attended: no gradient reaches any partial
    const double dl = dlse ? dlse->get(row) : 0.0;
    for (size_t i = 0; i < outs.size(); ++i) {
      const bool bad = !std::isfinite(lse);  // +inf / NaN rows: the unsplit backward is NaN too
      if (!bad && w[i] == 0) continue;
      double dot = 0;
      for (int64_t c = 0; c < d.Dv; ++c) {
        const int64_t x = row * d.Dv + c;
        const double go = dout.get(x);
        dot += go * (outs[i].get(x) - merged.out.get(x));
        g.douts[i].set(x, bad ? kNaN : w[i] * go);
      }
      g.dlses[i].set(row, bad ? kNaN : w[i] * (dl + dot));
    }
  }
  return g;
}

}  // namespace flexattn::cp
