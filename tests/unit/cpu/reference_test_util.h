#pragma once
// Helpers for the CPU reference tests: random tensors, hand-built block masks and a dense forward
// written independently of src/cpu (different loop structure, softmax as exp(s - max) / sum, block
// mask read from its index lists rather than a table).
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "flexattn/reference.h"

namespace flexattn::cpu::testing {

inline HostTensor random_tensor(std::vector<int64_t> shape, uint64_t seed, DType dtype = DType::F64,
                                double lo = -1.0, double hi = 1.0) {
  HostTensor t(dtype, std::move(shape));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, u(rng));
  return t;
}

// Block states per (b, h, qb, kb): 0 = not listed, 1 = partial, 2 = full. Fills the kv lists (ascending)
// and their q-side transposes, like create_block_mask would.
inline BlockMask make_block_mask(int64_t B, int64_t H, int64_t q_len, int64_t kv_len, int q_block, int kv_block,
                                 const std::vector<int>& states) {
  BlockMask bm;
  bm.B = B, bm.H = H, bm.q_len = q_len, bm.kv_len = kv_len, bm.q_block = q_block, bm.kv_block = kv_block;
  bm.nq = (q_len + q_block - 1) / q_block;
  bm.nkv = (kv_len + kv_block - 1) / kv_block;
  bm.has_full = true;
  const int64_t nq = bm.nq, nkv = bm.nkv;
  auto fill = [&](int want, std::vector<int32_t>* num, std::vector<int32_t>* idx, std::vector<int32_t>* qnum,
                  std::vector<int32_t>* qidx) {
    num->assign(size_t(B * H * nq), 0);
    idx->assign(size_t(B * H * nq * nkv), 0);
    qnum->assign(size_t(B * H * nkv), 0);
    qidx->assign(size_t(B * H * nkv * nq), 0);
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t qb = 0; qb < nq; ++qb)
        for (int64_t kb = 0; kb < nkv; ++kb)
          if (states[size_t((bh * nq + qb) * nkv + kb)] == want) {
            (*idx)[size_t((bh * nq + qb) * nkv + (*num)[size_t(bh * nq + qb)]++)] = int32_t(kb);
            (*qidx)[size_t((bh * nkv + kb) * nq + (*qnum)[size_t(bh * nkv + kb)]++)] = int32_t(qb);
          }
  };
  fill(1, &bm.kv_num_blocks, &bm.kv_indices, &bm.q_num_blocks, &bm.q_indices);
  fill(2, &bm.full_kv_num_blocks, &bm.full_kv_indices, &bm.full_q_num_blocks, &bm.full_q_indices);
  return bm;
}

struct Dense {
  std::vector<double> out, lse, max;
};

// The dense formula, straight from the semantics: expand K/V to the query heads, build the mask, softmax.
inline Dense dense_forward(const HostTensor& q, const HostTensor& k, const HostTensor& v, const ModFns& m,
                           double scale, const BlockMask* bm = nullptr) {
  const int64_t B = q.dim(0), Hq = q.dim(1), L = q.dim(2), D = q.dim(3);
  const int64_t Bkv = k.dim(0), Hkv = k.dim(1), S = k.dim(2), Dv = v.dim(3);
  const int64_t G = Hq / Hkv;
  Dense r;
  r.out.assign(size_t(B * Hq * L * Dv), 0.0);
  r.lse.assign(size_t(B * Hq * L), 0.0);
  r.max.assign(size_t(B * Hq * L), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t bk = Bkv == 1 ? 0 : b;
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / G;
      // allowed[i][j]: from the block mask's lists, or everywhere without one; 2 = full block.
      std::vector<int> allowed(size_t(L * S), bm ? 0 : 1);
      if (bm) {
        const int64_t mb = b % bm->B, mh = h % bm->H;
        for (int64_t qb = 0; qb < bm->nq; ++qb) {
          const int64_t row = (mb * bm->H + mh) * bm->nq + qb;
          for (int full = 0; full < 2; ++full) {
            const auto& num = full ? bm->full_kv_num_blocks : bm->kv_num_blocks;
            const auto& idx = full ? bm->full_kv_indices : bm->kv_indices;
            for (int32_t c = 0; c < num[size_t(row)]; ++c) {
              const int64_t kb = idx[size_t(row * bm->nkv + c)];
              for (int64_t i = qb * bm->q_block; i < std::min(L, (qb + 1) * bm->q_block); ++i)
                for (int64_t j = kb * bm->kv_block; j < std::min(S, (kb + 1) * bm->kv_block); ++j)
                  allowed[size_t(i * S + j)] = full ? 2 : 1;
            }
          }
        }
      }
      for (int64_t i = 0; i < L; ++i) {
        std::vector<double> sp(static_cast<size_t>(S));
        for (int64_t j = 0; j < S; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d)
            s += q.get(((b * Hq + h) * L + i) * D + d) * k.get(((bk * Hkv + hk) * S + j) * D + d);
          s *= scale;
          const double sm = m.score_mod ? m.score_mod(s, b, h, i, j) : s;
          const int a = allowed[size_t(i * S + j)];
          const bool keep = a == 2 || (a == 1 && (!m.mask_mod || m.mask_mod(b, h, i, j)));
          sp[size_t(j)] = keep ? sm : -INFINITY;
        }
        double mx = -INFINITY;
        for (double x : sp) mx = std::max(mx, x);
        const int64_t row = (b * Hq + h) * L + i;
        r.max[size_t(row)] = mx;
        if (mx == -INFINITY) {
          r.lse[size_t(row)] = -INFINITY;
          continue;
        }
        double sum = 0;
        for (double x : sp) sum += std::exp(x - mx);
        r.lse[size_t(row)] = mx + std::log(sum);
        for (int64_t j = 0; j < S; ++j) {
          const double p = std::exp(sp[size_t(j)] - mx) / sum;
          for (int64_t d = 0; d < Dv; ++d)
            r.out[size_t(row * Dv + d)] += p * v.get(((bk * Hkv + hk) * S + j) * Dv + d);
        }
      }
    }
  }
  return r;
}

inline std::vector<double> values(const HostTensor& t) {
  std::vector<double> out(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[size_t(i)] = t.get(i);
  return out;
}

}  // namespace flexattn::cpu::testing
