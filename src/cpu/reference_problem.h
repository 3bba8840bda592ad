#pragma once
// Internals of the CPU reference: the validated problem in double precision, the per-entry mask
// rule and the score computation shared by the forward and both backward passes (sharing them keeps
// the passes bitwise consistent with each other).
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "flexattn/reference.h"

namespace flexattn::cpu::detail {

enum BlockState : uint8_t { kSkip = 0, kPartial = 1, kFull = 2 };

struct Problem {
  int64_t B = 0, Hq = 0, L = 0, D = 0;
  int64_t Bkv = 0, Hkv = 0, S = 0, Dv = 0;
  int64_t group = 1;  // Hq / Hkv
  double scale = 1.0;
  int threads = 1;
  std::vector<double> q, k, v;  // row-major copies of the inputs

  // Block mask as a dense table of BlockState [mB, mH, nq, nkv]; empty = no block mask.
  std::vector<uint8_t> blocks;
  int64_t mB = 1, mH = 1, nq = 1, nkv = 1;
  int64_t q_block = 1, kv_block = 1;

  int64_t kv_batch(int64_t b) const { return Bkv == 1 ? 0 : b; }
  const double* q_row(int64_t b, int64_t h, int64_t i) const { return &q[((b * Hq + h) * L + i) * D]; }
  const double* k_row(int64_t b, int64_t h, int64_t j) const {
    return &k[((kv_batch(b) * Hkv + h / group) * S + j) * D];
  }
  const double* v_row(int64_t b, int64_t h, int64_t j) const {
    return &v[((kv_batch(b) * Hkv + h / group) * S + j) * Dv];
  }
  // BlockState for query row i and kv column j; kPartial everywhere without a block mask.
  uint8_t block_state(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (blocks.empty()) return kPartial;
    return blocks[(((b % mB) * mH + h % mH) * nq + i / q_block) * nkv + j / kv_block];
  }
};

// Validates q, k, v and the options, and converts the inputs to double.
Problem make_problem(const HostTensor& q, const HostTensor& k, const HostTensor& v, const Options& options);

// Four independent accumulators, fixed order: fast without -ffast-math and deterministic.
inline double dot(const double* a, const double* b, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t d = 0;
  for (; d + 4 <= n; d += 4) {
    s0 += a[d] * b[d];
    s1 += a[d + 1] * b[d + 1];
    s2 += a[d + 2] * b[d + 2];
    s3 += a[d + 3] * b[d + 3];
  }
  for (; d < n; ++d) s0 += a[d] * b[d];
  return (s0 + s1) + (s2 + s3);
}

inline bool kept(const Problem& p, const ModFns& m, int64_t b, int64_t h, int64_t i, int64_t j) {
  uint8_t st = p.block_state(b, h, i, j);
  if (st == kSkip) return false;
  if (st == kFull || !m.mask_mod) return true;
  return m.mask_mod(b, h, i, j);
}

// The scaled score before score_mod.
inline double raw_score(const Problem& p, int64_t b, int64_t h, int64_t i, int64_t j) {
  return dot(p.q_row(b, h, i), p.k_row(b, h, j), p.D) * p.scale;
}

inline double modded(const ModFns& m, double s, int64_t b, int64_t h, int64_t i, int64_t j) {
  return m.score_mod ? m.score_mod(s, b, h, i, j) : s;
}

// One query row: raw scores s, modded scores sm (-inf where not kept) and the kept flags.
struct RowScores {
  std::vector<double> s, sm;
  std::vector<uint8_t> keep;
  double max = 0, lse = 0, sum = 1;  // sum: of exp(sm - max) over the kept entries
  // The probability of a modded score. Not exp(sm - lse): lse = max + log(sum) rounds log(sum) away once |max| is
  // ~1e15 (scores of finfo.min from an additive padding mask), which gave the sum of V instead of its mean.
  double prob(double sm_j) const { return std::exp(sm_j - max) / sum; }
};
void score_row(const Problem& p, const ModFns& m, int64_t b, int64_t h, int64_t i, RowScores* r);

// Runs fn(task, thread) for task in [0, n) on `threads` threads (dynamic scheduling). The first
// exception thrown by any task is rethrown here after all threads have stopped.
void parallel_for(int64_t n, int threads, const std::function<void(int64_t task, int thread)>& fn);

HostTensor make_f64(std::vector<int64_t> shape, const std::vector<double>& values);

}  // namespace flexattn::cpu::detail
