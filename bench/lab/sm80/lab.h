#pragma once
// Kernel lab for the sm80 attention family: host-side pieces shared by the harness translation units.
// Not part of the library; the real runtime launches the same kernels through NVRTC.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <tuple>

#include <cuda_runtime.h>

#include "common/params.h"

#define LAB_CHECK(x)                                                                          \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, \
                   __LINE__, cudaGetErrorString(e_));                                         \
      std::exit(2);                                                                           \
    }                                                                                         \
  } while (0)

namespace lab {

using flexattn::kern::AttnParams;
using flexattn::kern::ModParams;

enum class Dt { BF16, FP16 };
inline const char* dt_name(Dt t) { return t == Dt::BF16 ? "bf16" : "fp16"; }

// Test variants compiled into the lab (variants.cuh has the device structs and host twins).
enum VariantId { kIdentity = 0, kWindow, kSoftcapCausal, kAlibiCausal, kRelBias, kNumVariants };
inline const char* variant_name(int v) {
  static const char* n[] = {"identity", "window", "softcap_causal", "alibi_causal", "relbias_grad"};
  return n[v];
}

struct KernelSet {
  std::function<void(const AttnParams&)> fwd, bwd_pre, bwd, bwd_dq, bwd_cvt;
};

struct Registry {
  std::map<std::tuple<int, int, int, int>, KernelSet> sets;  // (variant, dtype, D, Dv)
  void add(int v, Dt t, int d, int dv, KernelSet s) { sets[{v, int(t), d, dv}] = std::move(s); }
  const KernelSet* find(int v, Dt t, int d, int dv) const {
    auto it = sets.find({v, int(t), d, dv});
    return it == sets.end() ? nullptr : &it->second;
  }
};

// ---- host 16-bit conversions (round to nearest even) -------------------------------------------
inline float bits_to_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t f32_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
inline float bf16_to_f32(uint16_t b) { return bits_to_f32(uint32_t(b) << 16); }
uint16_t f32_to_fp16(float f);
float fp16_to_f32(uint16_t h);
inline uint16_t to16(Dt t, float f) { return t == Dt::BF16 ? f32_to_bf16(f) : f32_to_fp16(f); }
inline float from16(Dt t, uint16_t h) { return t == Dt::BF16 ? bf16_to_f32(h) : fp16_to_f32(h); }
inline double round16(Dt t, double x) { return from16(t, to16(t, float(x))); }

}  // namespace lab
