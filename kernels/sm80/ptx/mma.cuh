#pragma once
// mma.sync m16n8k16 (sm_80+), fp32 accumulate. Fragment layout (lane t, g = t/4, c = 2(t%4)):
//   A 16x16 row-major: a0 (g, c..c+1), a1 (g+8, c..), a2 (g, c+8..), a3 (g+8, c+8..)
//   B 16x8 (k x n):    b0 (k = c..c+1, n = g), b1 (k = c+8.., n = g)
//   C 16x8:            c0,c1 (g, c..c+1), c2,c3 (g+8, c..c+1)
#include "common/numeric.cuh"

namespace flexattn::kern {

template <class T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1);

template <>
__device__ __forceinline__ void mma_16816<bf16>(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma_16816<fp16>(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace flexattn::kern
