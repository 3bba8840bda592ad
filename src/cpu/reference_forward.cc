// Forward of the CPU reference: one task per (b, h, chunk of query rows); rows are independent, so
// the result does not depend on the thread count.
#include <algorithm>
#include <cmath>

#include "cpu/reference_problem.h"

namespace flexattn::cpu {

using detail::Problem;
using detail::RowScores;

namespace {
constexpr int64_t kRowChunk = 16;
}

ForwardResult forward(const HostTensor& q, const HostTensor& k, const HostTensor& v, const ModFns& mods,
                      const Options& options) {
  const Problem p = detail::make_problem(q, k, v, options);
  std::vector<double> out(size_t(p.B * p.Hq * p.L * p.Dv), 0.0);
  std::vector<double> lse(size_t(p.B * p.Hq * p.L)), mx(size_t(p.B * p.Hq * p.L));
  const int64_t chunks = (p.L + kRowChunk - 1) / kRowChunk;

  detail::parallel_for(p.B * p.Hq * chunks, p.threads, [&](int64_t task, int) {
    const int64_t bh = task / chunks, b = bh / p.Hq, h = bh % p.Hq;
    const int64_t i0 = task % chunks * kRowChunk, i1 = std::min(p.L, i0 + kRowChunk);
    RowScores r;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t row = bh * p.L + i;
      detail::score_row(p, mods, b, h, i, &r);
      lse[size_t(row)] = r.lse;
      mx[size_t(row)] = r.max;
      if (r.lse == -INFINITY) continue;  // fully masked: out stays 0
      double* o = &out[size_t(row * p.Dv)];
      for (int64_t j = 0; j < p.S; ++j) {
        if (!r.keep[size_t(j)]) continue;
        const double pij = r.prob(r.sm[size_t(j)]);
        const double* vj = p.v_row(b, h, j);
        for (int64_t d = 0; d < p.Dv; ++d) o[d] += pij * vj[d];
      }
    }
  });

  ForwardResult res;
  res.out = detail::make_f64({p.B, p.Hq, p.L, p.Dv}, out);
  res.lse = detail::make_f64({p.B, p.Hq, p.L}, lse);
  res.max_score = detail::make_f64({p.B, p.Hq, p.L}, mx);
  return res;
}

}  // namespace flexattn::cpu
