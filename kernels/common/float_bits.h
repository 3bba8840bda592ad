#pragma once
// A float's bits and back: the device intrinsics under NVRTC / nvcc's device pass, a byte copy on the host, so the
// arithmetic headers the host tests run as C++ (poly_exp2.cuh, poly_rcp.cuh, exact_sum.h) share one spelling.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define FA_BITS_FN __host__ __device__ __forceinline__
#else
#define FA_BITS_FN inline
#endif

namespace flexattn::kern {

FA_BITS_FN int float_bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_int(x);
#else
  int b;
  __builtin_memcpy(&b, &x, 4);
  return b;
#endif
}

FA_BITS_FN float bits_float(int b) {
#ifdef __CUDA_ARCH__
  return __int_as_float(b);
#else
  float x;
  __builtin_memcpy(&x, &b, 4);
  return x;
#endif
}

}  // namespace flexattn::kern
