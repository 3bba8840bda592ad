// Deterministic normal samples for inputs and buffer initialisation (splitmix64 + Box-Muller): simple,
// fast, and identical for a given seed wherever the code runs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

#include "flexattn/mods.h"

namespace flexattn::mods {

namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;

uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += kGamma);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in (0, 1]: never 0, so log(u) stays finite.
double uniform_open0(uint64_t* state) { return double((splitmix64(state) >> 11) + 1) * 0x1.0p-53; }

// Pairs [p0, p1) of the stream: pair p takes the generator's calls 2p and 2p + 1, and splitmix64's state after k
// calls is seed + k * gamma, so any range starts exactly where the sequential loop would be.
void fill_pairs(HostTensor* t, uint64_t seed, double stddev, int64_t p0, int64_t p1) {
  uint64_t state = seed + uint64_t(2 * p0) * kGamma;
  const int64_t n = t->numel();
  const double two_pi = 6.283185307179586476925;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t i = 2 * p;
    double r = std::sqrt(-2.0 * std::log(uniform_open0(&state)));
    double a = two_pi * uniform_open0(&state);
    t->set(i, stddev * r * std::cos(a));
    if (i + 1 < n) t->set(i + 1, stddev * r * std::sin(a));
  }
}

}  // namespace

void fill_normal(HostTensor* t, uint64_t seed, double stddev) {
  const int64_t pairs = (t->numel() + 1) / 2;
  // Large tensors on several threads, the same values: the CLI's B=2 H=16 S=8192 D=128 inputs (100 M values) took
  // 1.9 s of one core, paid before every `flexattn run` of a device round.
  constexpr int64_t kPairsPerThread = int64_t(1) << 20;
  const int64_t hw = int64_t(std::thread::hardware_concurrency());
  const int64_t threads = std::min<int64_t>(std::min<int64_t>(hw > 0 ? hw : 1, 32), (pairs + kPairsPerThread - 1) / kPairsPerThread);
  if (threads <= 1) return fill_pairs(t, seed, stddev, 0, pairs);
  std::vector<std::jthread> pool;  // joined on scope exit, also when the vector cannot grow
  pool.reserve(size_t(threads));
  const int64_t per = (pairs + threads - 1) / threads;
  for (int64_t k = 0; k < threads; ++k) {
    const int64_t p0 = std::min(pairs, k * per), p1 = std::min(pairs, p0 + per);
    try {
      pool.emplace_back(fill_pairs, t, seed, stddev, p0, p1);
    } catch (const std::system_error&) {  // no thread to spare: this range here
      fill_pairs(t, seed, stddev, p0, p1);
    }
  }
}

}  // namespace flexattn::mods
