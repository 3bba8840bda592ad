#include "reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <thread>

namespace lab {
namespace {

template <class F>
void parallel_for(int n, F f) {
  int nt = int(std::max(1u, std::thread::hardware_concurrency()));
  nt = std::min(nt, n);
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < nt; ++t) {
    threads.emplace_back([&] {
      for (int i; (i = next++) < n;) f(i);
    });
  }
  for (auto& t : threads) t.join();
}

constexpr double kNegInf = -INFINITY;

// Four independent partial sums: the compiler may not reassociate a double reduction, and one chain
// of dependent adds made the reference the slowest part of the lab.
inline double dot(const double* a, const double* b, int n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

}  // namespace

void reference(const Problem& pr, const RefInputs& in, const HostMod& mod, const ModParams& mp,
               long long buf_grad_numel, RefOutputs* o) {
  const int B = pr.B, Hq = pr.Hq, Hkv = pr.Hkv, L = pr.L, S = pr.S, D = pr.D, Dv = pr.Dv, G = Hq / Hkv;
  const int Bkv = pr.Bkv;
  const std::vector<double>&q = *in.q, &k = *in.k, &v = *in.v, &dout = *in.dout;
  const bool has_dlse = in.dlse != nullptr && !in.dlse->empty();
  o->out.assign(size_t(B) * Hq * L * Dv, 0.0);
  o->lse.assign(size_t(B) * Hq * L, kNegInf);
  o->maxs.assign(size_t(B) * Hq * L, kNegInf);
  o->dq.assign(size_t(B) * Hq * L * D, 0.0);
  o->dk.assign(size_t(Bkv) * Hkv * S * D, 0.0);
  o->dv.assign(size_t(Bkv) * Hkv * S * Dv, 0.0);
  o->buf_grad.assign(size_t(buf_grad_numel), 0.0);
  std::vector<double> P(size_t(B) * Hq * L * S, 0.0), dS(size_t(B) * Hq * L * S, 0.0);
  std::mutex mu;

  constexpr int kChunk = 16;
  const int q_chunks = (L + kChunk - 1) / kChunk;
  parallel_for(B * Hq * q_chunks, [&](int task) {
    const int c = task % q_chunks, bh = task / q_chunks, b = bh / Hq, h = bh % Hq;
    const int bk = Bkv == 1 ? 0 : b, hk = h / G;
    const double* K = &k[size_t(bk * Hkv + hk) * S * D];
    const double* V = &v[size_t(bk * Hkv + hk) * S * Dv];
    std::vector<double> s(S), sm(S), bg(mod.has_buffer_grad() ? size_t(buf_grad_numel) : 0, 0.0);
    for (int i = c * kChunk; i < std::min(L, (c + 1) * kChunk); ++i) {
      const size_t r = size_t(b * Hq + h) * L + i;
      const double* Q = &q[r * D];
      double mx = kNegInf;
      for (int j = 0; j < S; ++j) {
        s[j] = dot(Q, K + size_t(j) * D, D) * pr.scale;
        const double x = mod.score(mp, s[j], b, h, i, j);
        sm[j] = mod.mask(mp, b, h, i, j) ? x : kNegInf;
        mx = std::max(mx, sm[j]);
      }
      if (mx == kNegInf) continue;  // fully masked row: out 0, lse/max -inf, no gradient
      double sum = 0.0;
      for (int j = 0; j < S; ++j) sum += std::exp(sm[j] - mx);
      const double lse = mx + std::log(sum);
      o->lse[r] = lse;
      o->maxs[r] = mx;
      double* Pr = &P[r * S];
      double* out_i = &o->out[r * Dv];
      for (int j = 0; j < S; ++j) {
        Pr[j] = std::exp(sm[j] - lse);
        const double pr16 = round16(pr.dt, Pr[j]);
        for (int d = 0; d < Dv; ++d) out_i[d] += pr16 * V[size_t(j) * Dv + d];
      }
      const double* dO = &dout[r * Dv];
      double delta = dot(out_i, dO, Dv);
      if (has_dlse) delta -= (*in.dlse)[r];
      double* dSr = &dS[r * S];
      double* dq_i = &o->dq[r * D];
      for (int j = 0; j < S; ++j) {
        if (sm[j] == kNegInf) continue;
        const double dp = dot(dO, V + size_t(j) * Dv, Dv);
        const double g = Pr[j] * (dp - delta);
        dSr[j] = g * mod.dscore(mp, s[j], b, h, i, j);
        if (mod.has_buffer_grad()) mod.buffer_grad(mp, b, h, i, j, g, bg.data());
        for (int d = 0; d < D; ++d) dq_i[d] += pr.scale * dSr[j] * K[size_t(j) * D + d];
      }
    }
    if (!bg.empty()) {
      std::lock_guard<std::mutex> lock(mu);
      for (size_t i = 0; i < bg.size(); ++i) o->buf_grad[i] += bg[i];
    }
  });

  const int kv_chunks = (S + kChunk - 1) / kChunk;
  parallel_for(Bkv * Hkv * kv_chunks, [&](int task) {
    const int c = task % kv_chunks, bh = task / kv_chunks, bk = bh / Hkv, hk = bh % Hkv;
    for (int j = c * kChunk; j < std::min(S, (c + 1) * kChunk); ++j) {
      double* dk_j = &o->dk[(size_t(bk * Hkv + hk) * S + j) * D];
      double* dv_j = &o->dv[(size_t(bk * Hkv + hk) * S + j) * Dv];
      for (int b = (Bkv == 1 ? 0 : bk); b < (Bkv == 1 ? B : bk + 1); ++b) {
        for (int g = 0; g < G; ++g) {
          const int h = hk * G + g;
          for (int i = 0; i < L; ++i) {
            const size_t r = size_t(b * Hq + h) * L + i;
            const double ds = dS[r * S + j], p = P[r * S + j];
            if (ds != 0.0) {
              for (int d = 0; d < D; ++d) dk_j[d] += pr.scale * ds * q[r * D + d];
            }
            if (p != 0.0) {
              for (int d = 0; d < Dv; ++d) dv_j[d] += p * dout[r * Dv + d];
            }
          }
        }
      }
    }
  });
}

HostBlockMask build_block_mask(int mask_B, int mask_H, int L, int S, int qb, int kb, const HostMod& mod,
                               const ModParams& mp) {
  HostBlockMask m;
  m.mask_B = mask_B;
  m.mask_H = mask_H;
  m.q_block = qb;
  m.kv_block = kb;
  m.nq = (L + qb - 1) / qb;
  m.nkv = (S + kb - 1) / kb;
  const int nq = m.nq, nkv = m.nkv, rows = mask_B * mask_H;
  // 0 = skipped, 1 = partial, 2 = full
  std::vector<unsigned char> kind(size_t(rows) * nq * nkv, 0);
  parallel_for(rows * nq, [&](int task) {
    const int bh = task / nq, mq = task % nq, b = bh / mask_H, h = bh % mask_H;
    for (int n = 0; n < nkv; ++n) {
      long long count = 0;
      for (int i = mq * qb; i < std::min(L, (mq + 1) * qb); ++i) {
        for (int j = n * kb; j < std::min(S, (n + 1) * kb); ++j) count += mod.mask(mp, b, h, i, j) ? 1 : 0;
      }
      kind[(size_t(bh) * nq + mq) * nkv + n] = count == 0 ? 0 : (count == (long long)qb * kb ? 2 : 1);
    }
  });
  // Unused slots hold 0, a valid-looking index: a kernel reading past the count would double-count
  // block 0 and fail the comparison instead of silently skipping.
  m.kv_num.assign(size_t(rows) * nq, 0);
  m.full_kv_num.assign(size_t(rows) * nq, 0);
  m.kv_idx.assign(size_t(rows) * nq * nkv, 0);
  m.full_kv_idx.assign(size_t(rows) * nq * nkv, 0);
  m.q_num.assign(size_t(rows) * nkv, 0);
  m.full_q_num.assign(size_t(rows) * nkv, 0);
  m.q_idx.assign(size_t(rows) * nkv * nq, 0);
  m.full_q_idx.assign(size_t(rows) * nkv * nq, 0);
  for (int bh = 0; bh < rows; ++bh) {
    for (int mq = 0; mq < nq; ++mq) {
      for (int n = 0; n < nkv; ++n) {
        const int t = kind[(size_t(bh) * nq + mq) * nkv + n];
        if (t == 1) m.kv_idx[(size_t(bh) * nq + mq) * nkv + m.kv_num[size_t(bh) * nq + mq]++] = n;
        if (t == 2) m.full_kv_idx[(size_t(bh) * nq + mq) * nkv + m.full_kv_num[size_t(bh) * nq + mq]++] = n;
      }
    }
    for (int n = 0; n < nkv; ++n) {
      for (int mq = 0; mq < nq; ++mq) {
        const int t = kind[(size_t(bh) * nq + mq) * nkv + n];
        if (t == 1) m.q_idx[(size_t(bh) * nkv + n) * nq + m.q_num[size_t(bh) * nkv + n]++] = mq;
        if (t == 2) m.full_q_idx[(size_t(bh) * nkv + n) * nq + m.full_q_num[size_t(bh) * nkv + n]++] = mq;
      }
    }
  }
  return m;
}

}  // namespace lab
