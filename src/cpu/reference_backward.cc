// Backward of the CPU reference, in two passes like torch's Triton kernel (semantics.md §9.4):
//  1. rows (b, h, chunk of query rows): recompute the row, out, Δ; dq; buffer_grad calls.
//  2. columns (kv batch, kv head, chunk of kv columns): recompute P and dS entry by entry from the
//     saved lse and Δ; dk, dv summed over the batch (Bkv = 1), the group's heads and the rows, in
//     that fixed order.
// Each output element is owned by one task, so results are identical for any thread count.
#include <algorithm>
#include <cmath>

#include "cpu/reference_problem.h"

namespace flexattn::cpu {

using detail::Problem;
using detail::RowScores;

namespace {

constexpr int64_t kRowChunk = 16;
constexpr int64_t kColChunk = 16;

void check_grad_input(const HostTensor& t, const char* name, const std::vector<int64_t>& want, const char* dims) {
  check(is_float(t.dtype), std::string(name) + " must have a float dtype (f16, bf16, f32, f64); got " +
                               std::string(dtype_name(t.dtype)));
  check(t.shape == want, std::string(name) + " must have shape " + dims + " = " + shape_string(want) +
                             "; got " + shape_string(t.shape));
  t.check_byte_size(name);
}

double grad_of_score(const ModFns& m, double s, int64_t b, int64_t h, int64_t i, int64_t j, double g) {
  return m.score_grad ? m.score_grad(s, b, h, i, j, g) : g;
}

}  // namespace

BackwardResult backward(const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor& dout,
                        const HostTensor* dlse, const ModFns& mods, const Options& options) {
  const Problem p = detail::make_problem(q, k, v, options);
  check(!mods.buffer_grad || mods.buffer_grad_threads == 0 || p.threads <= mods.buffer_grad_threads,
        "options.threads: the backward runs " + std::to_string(p.threads) + " threads but the mods' buffer_grad "
        "accumulates for " + std::to_string(mods.buffer_grad_threads) + " (give VariantFns the same threads as "
        "Options::threads)");
  check_grad_input(dout, "dout", {p.B, p.Hq, p.L, p.Dv}, "[B, Hq, L, Dv]");
  if (dlse) check_grad_input(*dlse, "dlse", {p.B, p.Hq, p.L}, "[B, Hq, L]");
  if (options.delta_out) check_grad_input(*options.delta_out, "options.delta_out", {p.B, p.Hq, p.L, p.Dv}, "[B, Hq, L, Dv]");

  const int64_t rows = p.B * p.Hq * p.L;
  std::vector<double> dO(static_cast<size_t>(rows * p.Dv));
  for (size_t x = 0; x < dO.size(); ++x) dO[x] = dout.get(int64_t(x));
  std::vector<double> lse(static_cast<size_t>(rows)), delta(static_cast<size_t>(rows));
  std::vector<double> row_max(static_cast<size_t>(rows)), row_sum(static_cast<size_t>(rows));
  std::vector<double> dq(p.q.size(), 0.0), dk(p.k.size(), 0.0), dv(p.v.size(), 0.0);

  // Pass 1: rows.
  const int64_t chunks = (p.L + kRowChunk - 1) / kRowChunk;
  detail::parallel_for(p.B * p.Hq * chunks, p.threads, [&](int64_t task, int thread) {
    const int64_t bh = task / chunks, b = bh / p.Hq, h = bh % p.Hq;
    const int64_t i0 = task % chunks * kRowChunk, i1 = std::min(p.L, i0 + kRowChunk);
    RowScores r;
    std::vector<double> out_row(size_t(p.Dv));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t row = bh * p.L + i;
      detail::score_row(p, mods, b, h, i, &r);
      lse[size_t(row)] = r.lse;
      row_max[size_t(row)] = r.max;
      row_sum[size_t(row)] = r.sum;
      if (r.lse == -INFINITY) continue;  // fully masked: P = 0, no gradient anywhere
      std::fill(out_row.begin(), out_row.end(), 0.0);
      for (int64_t j = 0; j < p.S; ++j) {
        if (!r.keep[size_t(j)]) continue;
        r.sm[size_t(j)] = r.prob(r.sm[size_t(j)]);  // sm now holds P
        const double* vj = p.v_row(b, h, j);
        for (int64_t d = 0; d < p.Dv; ++d) out_row[size_t(d)] += r.sm[size_t(j)] * vj[d];
      }
      if (options.delta_out)
        for (int64_t d = 0; d < p.Dv; ++d) out_row[size_t(d)] = options.delta_out->get(row * p.Dv + d);
      const double* dOi = &dO[size_t(row * p.Dv)];
      const double dl = dlse ? dlse->get(row) : 0.0;
      const double di = detail::dot(out_row.data(), dOi, p.Dv) - dl;
      delta[size_t(row)] = di;
      double* dqi = &dq[size_t(row * p.D)];
      for (int64_t j = 0; j < p.S; ++j) {
        if (!r.keep[size_t(j)]) continue;
        const double pij = r.sm[size_t(j)], s = r.s[size_t(j)];
        const double ds_mod = pij * (detail::dot(dOi, p.v_row(b, h, j), p.Dv) - di);
        if (mods.buffer_grad) mods.buffer_grad(thread, s, b, h, i, j, ds_mod);
        const double ds = grad_of_score(mods, s, b, h, i, j, ds_mod);
        const double* kj = p.k_row(b, h, j);
        for (int64_t d = 0; d < p.D; ++d) dqi[d] += ds * kj[d];
      }
      for (int64_t d = 0; d < p.D; ++d) dqi[d] *= p.scale;
    }
  });

  // Pass 2: columns. Batches feeding kv batch bk: just bk, or all of them when K/V broadcast.
  const int64_t col_chunks = (p.S + kColChunk - 1) / kColChunk;
  detail::parallel_for(p.Bkv * p.Hkv * col_chunks, p.threads, [&](int64_t task, int) {
    const int64_t bhk = task / col_chunks, bk = bhk / p.Hkv, hk = bhk % p.Hkv;
    const int64_t j0 = task % col_chunks * kColChunk, j1 = std::min(p.S, j0 + kColChunk);
    const int64_t b_begin = p.Bkv == 1 ? 0 : bk, b_end = p.Bkv == 1 ? p.B : bk + 1;
    for (int64_t b = b_begin; b < b_end; ++b) {
      for (int64_t h = hk * p.group; h < (hk + 1) * p.group; ++h) {
        for (int64_t i = 0; i < p.L; ++i) {
          const int64_t row = (b * p.Hq + h) * p.L + i;
          const double li = lse[size_t(row)], di = delta[size_t(row)];
          const double mi = row_max[size_t(row)], sum_i = row_sum[size_t(row)];
          if (li == -INFINITY) continue;
          const double* qi = p.q_row(b, h, i);
          const double* dOi = &dO[size_t(row * p.Dv)];
          for (int64_t j = j0; j < j1; ++j) {
            if (!detail::kept(p, mods, b, h, i, j)) continue;
            const double s = detail::raw_score(p, b, h, i, j);
            const double pij = std::exp(detail::modded(mods, s, b, h, i, j) - mi) / sum_i;
            double* dvj = &dv[size_t((bhk * p.S + j) * p.Dv)];
            for (int64_t d = 0; d < p.Dv; ++d) dvj[d] += pij * dOi[d];
            const double ds_mod = pij * (detail::dot(dOi, p.v_row(b, h, j), p.Dv) - di);
            const double ds = grad_of_score(mods, s, b, h, i, j, ds_mod);
            double* dkj = &dk[size_t((bhk * p.S + j) * p.D)];
            for (int64_t d = 0; d < p.D; ++d) dkj[d] += ds * qi[d];
          }
        }
      }
    }
    for (int64_t j = j0; j < j1; ++j) {
      double* dkj = &dk[size_t((bhk * p.S + j) * p.D)];
      for (int64_t d = 0; d < p.D; ++d) dkj[d] *= p.scale;
    }
  });

  BackwardResult res;
  res.dq = detail::make_f64(q.shape, dq);
  res.dk = detail::make_f64(k.shape, dk);
  res.dv = detail::make_f64(v.shape, dv);
  return res;
}

}  // namespace flexattn::cpu
