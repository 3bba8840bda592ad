#pragma once
// 16-bit element types and the few float helpers the kernels need, written with inline PTX so that
// no toolkit header (cuda_bf16.h, cuda_fp16.h, math.h) is needed under NVRTC.
namespace flexattn::kern {

// Storage-only tags; the kernels never do arithmetic in 16 bits.
struct bf16 {
  unsigned short bits;
};
struct fp16 {
  unsigned short bits;
};

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ float pos_inf() { return __int_as_float(0x7f800000); }
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// ex2.approx: 2 ulp, exp2(-inf) = +0, which the online softmax relies on for fully masked rows.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <class T>
struct Num;

template <>
struct Num<bf16> {
  // Round-to-nearest-even pack: lo in bits 0..15, hi in bits 16..31 (the mma operand order).
  static __device__ __forceinline__ unsigned pack(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
  static __device__ __forceinline__ float lo(unsigned x) { return __int_as_float(int(x << 16)); }
  static __device__ __forceinline__ float hi(unsigned x) { return __int_as_float(int(x & 0xffff0000u)); }
};

template <>
struct Num<fp16> {
  static __device__ __forceinline__ unsigned pack(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
  static __device__ __forceinline__ float half_to_float(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
  }
  static __device__ __forceinline__ float lo(unsigned x) { return half_to_float((unsigned short)(x & 0xffffu)); }
  static __device__ __forceinline__ float hi(unsigned x) { return half_to_float((unsigned short)(x >> 16)); }
};

}  // namespace flexattn::kern
