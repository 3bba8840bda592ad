#pragma once
// What the lab's timing drivers (timing.cu, sweep_main.cu) share: random device inputs and CUDA-event
// medians. Device code: include from .cu files only.
#include <algorithm>
#include <vector>

#include "common/numeric.cuh"
#include "lab.h"

namespace lab {
namespace {

// Uniform values in [-2, 2) from a hash of the index: random-looking data without a host round trip
// (zeros would time faster than real data).
__global__ void fill_random16(unsigned* p, size_t n_pairs, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n_pairs; i += size_t(gridDim.x) * blockDim.x) {
    unsigned x = unsigned(i) * 2654435761u ^ seed;
    x ^= x >> 15, x *= 2246822519u, x ^= x >> 13, x *= 3266489917u, x ^= x >> 16;
    const float a = float(x & 0xffff) / 16384.f - 2.f, b = float(x >> 16) / 16384.f - 2.f;
    p[i] = flexattn::kern::Num<flexattn::kern::bf16>::pack(a, b);
  }
}

// Median of `reps` timed calls of f (CUDA events on the default stream) after `warm` untimed ones, in ms.
template <class F>
double median_ms(F f, int warm, int reps) {
  for (int i = 0; i < warm; ++i) f();
  cudaEvent_t a, b;
  LAB_CHECK(cudaEventCreate(&a));
  LAB_CHECK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    LAB_CHECK(cudaEventRecord(a));
    f();
    LAB_CHECK(cudaEventRecord(b));
    LAB_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    LAB_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  LAB_CHECK(cudaEventDestroy(a));
  LAB_CHECK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace
}  // namespace lab
