#include "check.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>

#include "flexattn/error.h"

namespace flexattn::cli {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> to_doubles(const HostTensor& t) {
  std::vector<double> r(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) r[size_t(i)] = t.get(i);
  return r;
}

// The textbook attention of semantics.md §3, one query row at a time, in double. Float buffers are
// held as f64 copies so that finite differences can perturb them by less than an f32 ulp.
class DenseModel {
 public:
  explicit DenseModel(const Problem& p) : p_(p), q_(to_doubles(p.q)), k_(to_doubles(p.k)), v_(to_doubles(p.v)) {
    const auto& s = p.shape;
    scale_ = 1.0 / std::sqrt(double(s.D));
    kv_batch_ = p.k.dim(0);
    group_ = s.H / s.Hkv;
    for (const auto& [name, t] : p.buffers) {
      HostTensor c = t;
      if (is_float(t.dtype)) {
        c = HostTensor(DType::F64, t.shape);
        for (int64_t i = 0; i < t.numel(); ++i) c.set(i, t.get(i));
      }
      buffers_[name] = std::move(c);
    }
    for (const auto& [name, t] : buffers_) views_[name] = ir::BufferView{t.dtype, t.shape, t.data()};
    ir::EvalEnv env;
    env.scalar = [&p](const std::string& n) { return p.scalars.at(n); };
    env.buffer = [this](const std::string& n) -> const ir::BufferView* {
      auto it = views_.find(n);
      return it == views_.end() ? nullptr : &it->second;
    };
    if (!p.variant.mask_mod.empty()) mask_.emplace(p.variant.mask_mod), mask_->bind(env);
    if (!p.variant.score_mod.empty()) score_.emplace(p.variant.score_mod), score_->bind(env);
    s_.resize(size_t(s.KV));
  }

  // out[0, Dv) and *lse for query row (b, h, i).
  void row(int64_t b, int64_t h, int64_t i, double* out, double* lse) {
    const auto& s = p_.shape;
    const int64_t bk = kv_batch_ == 1 ? 0 : b, hk = h / group_;
    const double* qr = &q_[size_t(((b * s.H + h) * s.Q + i) * s.D)];
    double m = -kInf;
    for (int64_t j = 0; j < s.KV; ++j) {
      const double* kr = &k_[size_t(((bk * s.Hkv + hk) * s.KV + j) * s.D)];
      double dot = 0;
      for (int64_t d = 0; d < s.D; ++d) dot += qr[d] * kr[d];
      double x = dot * scale_;
      if (score_) x = score_->run(x, b, h, i, j).as_double();
      if (mask_ && !mask_->run(0.0, b, h, i, j).as_bool()) x = -kInf;
      s_[size_t(j)] = x;
      m = std::isnan(x) || std::isnan(m) ? std::numeric_limits<double>::quiet_NaN() : std::max(m, x);
    }
    for (int64_t d = 0; d < s.Dv; ++d) out[d] = 0;
    if (m == -kInf) {
      *lse = -kInf;
      return;
    }
    double sum = 0;
    for (int64_t j = 0; j < s.KV; ++j) sum += std::exp(s_[size_t(j)] - m);
    *lse = m + std::log(sum);
    for (int64_t j = 0; j < s.KV; ++j) {
      const double pj = std::exp(s_[size_t(j)] - *lse);
      if (pj == 0) continue;
      const double* vr = &v_[size_t(((bk * s.Hkv + hk) * s.KV + j) * s.Dv)];
      for (int64_t d = 0; d < s.Dv; ++d) out[d] += pj * vr[d];
    }
  }

  // torch eager's precision for low-precision inputs (semantics.md §3): scores and softmax in f32,
  // P rounded to the input dtype before P·V, f32 accumulation, out rounded to the input dtype.
  void row_lowp(int64_t b, int64_t h, int64_t i, DType dtype, double* out, double* lse) {
    const auto& s = p_.shape;
    auto round = [dtype](float x) {
      if (dtype == DType::BF16) return bf16_to_float(float_to_bf16(x));
      if (dtype == DType::F16) return half_to_float(float_to_half(x));
      return x;
    };
    const int64_t bk = kv_batch_ == 1 ? 0 : b, hk = h / group_;
    const double* qr = &q_[size_t(((b * s.H + h) * s.Q + i) * s.D)];
    float m = -INFINITY;
    for (int64_t j = 0; j < s.KV; ++j) {
      const double* kr = &k_[size_t(((bk * s.Hkv + hk) * s.KV + j) * s.D)];
      float dot = 0;
      for (int64_t d = 0; d < s.D; ++d) dot += float(qr[d]) * float(kr[d]);
      float x = dot * float(scale_);
      if (score_) x = float(score_->run(x, b, h, i, j).as_double());
      if (mask_ && !mask_->run(0.0, b, h, i, j).as_bool()) x = -INFINITY;
      s_[size_t(j)] = x;
      m = std::max(m, x);
    }
    for (int64_t d = 0; d < s.Dv; ++d) out[d] = 0;
    if (m == -INFINITY) {
      *lse = -kInf;
      return;
    }
    float sum = 0;
    for (int64_t j = 0; j < s.KV; ++j) sum += std::exp(float(s_[size_t(j)]) - m);
    *lse = double(m + std::log(sum));
    std::vector<float> acc(size_t(s.Dv), 0.0f);
    for (int64_t j = 0; j < s.KV; ++j) {
      const float pj = round(std::exp(float(s_[size_t(j)]) - m) / sum);
      const double* vr = &v_[size_t(((bk * s.Hkv + hk) * s.KV + j) * s.Dv)];
      for (int64_t d = 0; d < s.Dv; ++d) acc[size_t(d)] += pj * float(vr[d]);
    }
    for (int64_t d = 0; d < s.Dv; ++d) out[d] = round(acc[size_t(d)]);
  }

  // Σ over the listed rows of dout · out.
  double loss(const std::vector<std::array<int64_t, 3>>& rows, const std::vector<double>& dout) {
    const auto& s = p_.shape;
    std::vector<double> o(size_t(s.Dv));
    double l = 0, lse = 0;
    for (const auto& r : rows) {
      row(r[0], r[1], r[2], o.data(), &lse);
      const double* g = &dout[size_t(((r[0] * s.H + r[1]) * s.Q + r[2]) * s.Dv)];
      for (int64_t d = 0; d < s.Dv; ++d) l += g[d] * o[size_t(d)];
    }
    return l;
  }

  double* values(const std::string& name) {
    if (name == "q") return q_.data();
    if (name == "k") return k_.data();
    if (name == "v") return v_.data();
    return static_cast<double*>(buffers_.at(name).data());
  }

  // The rows whose output depends on element `flat` of tensor `name`.
  std::vector<std::array<int64_t, 3>> affected_rows(const std::string& name, int64_t flat) const {
    const auto& s = p_.shape;
    std::vector<std::array<int64_t, 3>> rows;
    if (name == "q") {
      const int64_t r = flat / s.D;
      rows.push_back({r / (s.H * s.Q), (r / s.Q) % s.H, r % s.Q});
    } else if (name == "k" || name == "v") {
      const int64_t per_row = name == "k" ? s.D : s.Dv;
      const int64_t bk = flat / per_row / s.KV / s.Hkv, hk = (flat / per_row / s.KV) % s.Hkv;
      for (int64_t b = 0; b < s.B; ++b) {
        if (kv_batch_ != 1 && b != bk) continue;
        for (int64_t h = hk * group_; h < (hk + 1) * group_; ++h)
          for (int64_t i = 0; i < s.Q; ++i) rows.push_back({b, h, i});
      }
    } else {
      for (int64_t b = 0; b < s.B; ++b)
        for (int64_t h = 0; h < s.H; ++h)
          for (int64_t i = 0; i < s.Q; ++i) rows.push_back({b, h, i});
    }
    return rows;
  }

 private:
  const Problem& p_;
  std::vector<double> q_, k_, v_;
  std::map<std::string, HostTensor> buffers_;
  std::map<std::string, ir::BufferView> views_;
  std::optional<ir::Evaluator> mask_, score_;
  std::vector<double> s_;
  double scale_ = 1;
  int64_t kv_batch_ = 1, group_ = 1;
};

uint64_t next_random(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// |got - want|, with matching non-finite values counted as equal and mismatching ones as infinite.
double difference(double got, double want) {
  if (std::isfinite(got) && std::isfinite(want)) return std::fabs(got - want);
  if (std::isnan(got) && std::isnan(want)) return 0;
  return got == want ? 0 : kInf;
}

Discrepancy finish(std::string name, double max_abs, double scale, double tol, int64_t compared) {
  Discrepancy d;
  d.name = std::move(name);
  d.max_abs = max_abs;
  d.rel = max_abs == 0 ? 0 : max_abs / std::max(scale, std::numeric_limits<double>::min());
  d.tol = tol;
  d.compared = compared;
  return d;
}

}  // namespace

double max_abs_of(const HostTensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (std::isfinite(t.get(i))) m = std::max(m, std::fabs(t.get(i)));
  return m;
}

Discrepancy compare(const std::string& name, const HostTensor& got, const HostTensor& want, double tol,
                    double scale_floor) {
  check(got.shape == want.shape, "compare " + name + ": shapes differ");
  double m = 0;
  for (int64_t i = 0; i < got.numel(); ++i) m = std::max(m, difference(got.get(i), want.get(i)));
  return finish(name, m, std::max(max_abs_of(want), scale_floor), tol, got.numel());
}

namespace {

ir::Expr approximation_made_off(const ir::Expr& e, bool* found) {
  if (e.empty()) return e;
  std::map<const ir::Node*, ir::Expr> done;
  for (const ir::Node* n : ir::topo_order(e)) {
    std::vector<ir::Expr> args;
    for (const ir::NodePtr& a : n->args) args.push_back(done.at(a.get()));
    if (n->op == ir::Op::TanhApprox) {
      *found = true;
      done[n] = ir::tanh(args[0]) * ir::literal(1.0 - kApproxRelError, DType::F32, true);
    } else {
      done[n] = ir::make_node(n->op, n->type, n->weak, args, n->value, n->name, n->buffer_dtype);
    }
  }
  return done.at(e.get());
}

}  // namespace

std::optional<Variant> with_approximation_error(const Variant& v) {
  bool found = false;
  Variant off = v;
  off.score_mod = approximation_made_off(v.score_mod, &found);
  off.mask_mod = approximation_made_off(v.mask_mod, &found);
  if (!found) return std::nullopt;
  return off;
}

void dense_forward(const Problem& p, HostTensor* out, HostTensor* lse, DType precision) {
  const auto& s = p.shape;
  DenseModel model(p);
  *out = HostTensor(DType::F64, {s.B, s.H, s.Q, s.Dv});
  *lse = HostTensor(DType::F64, {s.B, s.H, s.Q});
  double* o = static_cast<double*>(out->data());
  double* l = static_cast<double*>(lse->data());
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Q; ++i) {
        const int64_t r = (b * s.H + h) * s.Q + i;
        if (precision == DType::F64) model.row(b, h, i, o + r * s.Dv, l + r);
        else model.row_lowp(b, h, i, precision, o + r * s.Dv, l + r);
      }
}

std::vector<Discrepancy> check_gradients(const Problem& p, const HostTensor& dq, const HostTensor& dk,
                                         const HostTensor& dv, const std::map<std::string, HostTensor>& dbuffers,
                                         int entries, double tol) {
  DenseModel model(p);
  const std::vector<double> dout = to_doubles(p.dout);
  std::vector<std::pair<std::string, const HostTensor*>> grads = {{"q", &dq}, {"k", &dk}, {"v", &dv}};
  for (const std::string& name : p.variant.grad_buffers) {
    auto it = dbuffers.find(name);
    check(it != dbuffers.end(), "no gradient was computed for buffer '" + name + "'");
    grads.push_back({name, &it->second});
  }
  std::vector<Discrepancy> result;
  uint64_t state = p.shape.seed ^ 0x5DEECE66Dull;
  for (const auto& [name, grad] : grads) {
    const int64_t n = grad->numel();
    double* x = model.values(name);
    double max_abs = 0;
    int count = int(std::min<int64_t>(entries, n));
    for (int e = 0; e < count; ++e) {
      const int64_t flat = count == n ? e : int64_t(next_random(&state) % uint64_t(n));
      const auto rows = model.affected_rows(name, flat);
      const double x0 = x[flat];
      // Central differences in double: truncation ~eps^2 * L''' and rounding ~1e-16 |L| / eps are both
      // far below the tolerance for smooth mods at eps = 1e-4.
      const double eps = 1e-4 * std::max(1.0, std::fabs(x0));
      x[flat] = x0 + eps;
      const double lp = model.loss(rows, dout);
      x[flat] = x0 - eps;
      const double lm = model.loss(rows, dout);
      x[flat] = x0;
      max_abs = std::max(max_abs, difference(grad->get(flat), (lp - lm) / (2 * eps)));
    }
    result.push_back(finish("d" + name, max_abs, max_abs_of(*grad), tol, count));
  }
  return result;
}

std::string format(const Discrepancy& d) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%-10s max_abs %.3e  rel %.3e  (tol %.0e, %lld entries)  %s", d.name.c_str(),
                d.max_abs, d.rel, d.tol, (long long)d.compared, d.ok() ? "ok" : "FAILED");
  return buf;
}

}  // namespace flexattn::cli
