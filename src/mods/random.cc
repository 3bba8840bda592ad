// Deterministic normal samples for inputs and buffer initialisation (splitmix64 + Box-Muller): simple,
// fast, and identical for a given seed wherever the code runs.
#include <cmath>
#include <cstdint>

#include "flexattn/mods.h"

namespace flexattn::mods {

namespace {

uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in (0, 1]: never 0, so log(u) stays finite.
double uniform_open0(uint64_t* state) { return double((splitmix64(state) >> 11) + 1) * 0x1.0p-53; }

}  // namespace

void fill_normal(HostTensor* t, uint64_t seed, double stddev) {
  uint64_t state = seed;
  const int64_t n = t->numel();
  const double two_pi = 6.283185307179586476925;
  for (int64_t i = 0; i < n; i += 2) {
    double r = std::sqrt(-2.0 * std::log(uniform_open0(&state)));
    double a = two_pi * uniform_open0(&state);
    t->set(i, stddev * r * std::cos(a));
    if (i + 1 < n) t->set(i + 1, stddev * r * std::sin(a));
  }
}

}  // namespace flexattn::mods
