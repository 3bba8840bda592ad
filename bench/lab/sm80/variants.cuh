#pragma once
// Hand-written test variants (what the codegen will later emit) and their double-precision host twins
// for the CPU reference. Runtime values come from ModParams exactly as generated code will read them:
//   window:         keep iff lit[0] <= q - kv < lit[1]   (causal: 0, 2^30; sliding: 0, W; shifted: 3, 2^30)
//   softcap_causal: lit[0] * tanh(s / lit[0]), mask q >= kv
//   alibi_causal:   s + slope[h] * (kv - q), slope = buf[0] fp32 [Hq], mask q >= kv
//   relbias_grad:   s + bias[h, q - kv + lit[0]], bias = buf[0] fp32 [Hq, W], W = buf_shape[0][1],
//                   lit[0] = S - 1; gradient of bias accumulated into buf_grad[0]
#include <cmath>

#include "common/variant.cuh"

namespace lab {

using flexattn::kern::ModParams;

struct WindowVariant {
  static constexpr bool kHasScoreMod = false;
  static constexpr bool kHasMaskMod = true;
  static constexpr bool kHasBufferGrad = false;
  __device__ static float score_mod(const ModParams&, float s, int, int, int, int) { return s; }
  __device__ static bool mask_mod(const ModParams& m, int, int, int q, int kv) {
    const int d = q - kv;
    return d >= int(m.lit[0]) && d < int(m.lit[1]);
  }
  __device__ static float score_grad(const ModParams&, float, int, int, int, int, float g) { return g; }
  __device__ static void buffer_grad(const ModParams&, float, int, int, int, int, float) {}
};

struct SoftcapCausalVariant {
  static constexpr bool kHasScoreMod = true;
  static constexpr bool kHasMaskMod = true;
  static constexpr bool kHasBufferGrad = false;
  __device__ static float score_mod(const ModParams& m, float s, int, int, int, int) {
    const float c = float(m.lit[0]);
    return c * tanhf(s / c);
  }
  __device__ static bool mask_mod(const ModParams&, int, int, int q, int kv) { return q >= kv; }
  __device__ static float score_grad(const ModParams& m, float s, int, int, int, int, float g) {
    const float t = tanhf(s / float(m.lit[0]));
    return g * (1.f - t * t);
  }
  __device__ static void buffer_grad(const ModParams&, float, int, int, int, int, float) {}
};

struct AlibiCausalVariant {
  static constexpr bool kHasScoreMod = true;
  static constexpr bool kHasMaskMod = true;
  static constexpr bool kHasBufferGrad = false;
  __device__ static float score_mod(const ModParams& m, float s, int, int h, int q, int kv) {
    return s + static_cast<const float*>(m.buf[0])[h] * float(kv - q);
  }
  __device__ static bool mask_mod(const ModParams&, int, int, int q, int kv) { return q >= kv; }
  __device__ static float score_grad(const ModParams&, float, int, int, int, int, float g) { return g; }
  __device__ static void buffer_grad(const ModParams&, float, int, int, int, int, float) {}
};

struct RelBiasVariant {
  static constexpr bool kHasScoreMod = true;
  static constexpr bool kHasMaskMod = false;
  static constexpr bool kHasBufferGrad = true;
  __device__ static long long index(const ModParams& m, int h, int q, int kv) {
    return (long long)h * m.buf_shape[0][1] + (q - kv + int(m.lit[0]));
  }
  __device__ static float score_mod(const ModParams& m, float s, int, int h, int q, int kv) {
    return s + static_cast<const float*>(m.buf[0])[index(m, h, q, kv)];
  }
  __device__ static bool mask_mod(const ModParams&, int, int, int, int) { return true; }
  __device__ static float score_grad(const ModParams&, float, int, int, int, int, float g) { return g; }
  __device__ static void buffer_grad(const ModParams& m, float, int, int h, int q, int kv, float g) {
    atomicAdd(m.buf_grad[0] + index(m, h, q, kv), g);
  }
};

// ---- host twins (double precision; buffers in the ModParams point to host copies) ---------------
struct HostMod {
  virtual ~HostMod() = default;
  virtual double score(const ModParams&, double s, int, int, int, int) const { return s; }
  virtual double dscore(const ModParams&, double, int, int, int, int) const { return 1.0; }  // d score / d s
  virtual bool mask(const ModParams&, int, int, int, int) const { return true; }
  virtual bool has_buffer_grad() const { return false; }
  virtual void buffer_grad(const ModParams&, int, int, int, int, double, double*) const {}
};

struct HostWindow : HostMod {
  bool mask(const ModParams& m, int, int, int q, int kv) const override {
    const int d = q - kv;
    return d >= int(m.lit[0]) && d < int(m.lit[1]);
  }
};
struct HostSoftcapCausal : HostMod {
  double score(const ModParams& m, double s, int, int, int, int) const override {
    return m.lit[0] * std::tanh(s / m.lit[0]);
  }
  double dscore(const ModParams& m, double s, int, int, int, int) const override {
    const double t = std::tanh(s / m.lit[0]);
    return 1.0 - t * t;
  }
  bool mask(const ModParams&, int, int, int q, int kv) const override { return q >= kv; }
};
struct HostAlibiCausal : HostMod {
  double score(const ModParams& m, double s, int, int h, int q, int kv) const override {
    return s + double(static_cast<const float*>(m.buf[0])[h]) * (kv - q);
  }
  bool mask(const ModParams&, int, int, int q, int kv) const override { return q >= kv; }
};
struct HostRelBias : HostMod {
  static long long index(const ModParams& m, int h, int q, int kv) {
    return (long long)h * m.buf_shape[0][1] + (q - kv + int(m.lit[0]));
  }
  double score(const ModParams& m, double s, int, int h, int q, int kv) const override {
    return s + double(static_cast<const float*>(m.buf[0])[index(m, h, q, kv)]);
  }
  bool has_buffer_grad() const override { return true; }
  void buffer_grad(const ModParams& m, int, int h, int q, int kv, double g, double* grad) const override {
    grad[index(m, h, q, kv)] += g;
  }
};

}  // namespace lab
