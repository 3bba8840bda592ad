#pragma once
// wgmma (sm_90a): warpgroup-wide asynchronous MMA, m64nNk16, fp32 accumulate, bf16/fp16 inputs.
//
// Accumulator layout (per warpgroup, N/2 floats per thread): warp w of the group owns rows 16w..16w+15;
// lane l, g = l / 4, t = l % 4; for each 8-column atom i: d[4i], d[4i+1] = row g, cols 8i+2t, 8i+2t+1;
// d[4i+2], d[4i+3] = row g+8, same cols (the mma.sync C layout, atom by atom).
// Register A fragment of k-step s (cols 16s..16s+15): {pack(d[8s], d[8s+1]), pack(d[8s+2], d[8s+3]),
// pack(d[8s+4], d[8s+5]), pack(d[8s+6], d[8s+7])} -- so a rounded S accumulator *is* P in A layout.
//
// Ordering contract (PTX): wgmma_fence() before the first wgmma of a group whenever accumulator or A
// registers were written since the last wgmma; never touch those registers between issue and the
// wgmma_wait that retires them. fence_operands() pins them at both ends so the compiler cannot move
// their ordinary uses across the asynchronous window.
#include "common/numeric.cuh"

namespace flexattn::kern::sm90 {

// Shared-memory matrix descriptor, 128-byte swizzle (bits 62-63 = 1). Fields in 16-byte units:
// start address (bits 0-13), leading byte offset (16-29), stride byte offset (32-45); base offset
// (49-51) stays 0, so every tile must start on a 1024-byte boundary (one 8-row swizzle atom).
//   K-major operand ([rows][64] slabs, K contiguous): SBO = 1024 (next 8 rows); LBO unused (16).
//     k-step of 16 elements: +32 bytes inside a slab; the next 64-wide slab starts rows * 128 bytes on.
//   MN-major operand (rows = K, 64 MN elements per slab row): LBO = distance between 64-wide MN
//     slabs (rows * 128), SBO = 1024 (next 8 K rows); k-step of 16 rows: +2048 bytes.
struct SmemDesc {
  unsigned lo;  // start address >> 4 | (LBO >> 4) << 16
  unsigned hi;  // SBO >> 4 | swizzle mode << 30
};

__device__ __forceinline__ SmemDesc smem_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return SmemDesc{((addr & 0x3FFFFu) >> 4) | (((lbo >> 4) & 0x3FFFu) << 16), ((sbo >> 4) & 0x3FFFu) | (1u << 30)};
}

// The descriptor of the operand `bytes` past the described one (offsets keep the address below
// 256 KiB, so the 14-bit address field never carries into the LBO bits).
__device__ __forceinline__ unsigned long long desc_at(SmemDesc d, unsigned bytes) {
  return ((unsigned long long)d.hi << 32) | (unsigned long long)(d.lo + (bytes >> 4));
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Waits until at most N committed groups of this warpgroup are still in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

template <int N>
__device__ __forceinline__ void fence_operands(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_operands(unsigned (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

template <class T>
struct WgmmaType;
template <>
struct WgmmaType<bf16> {
  static constexpr bool kBf16 = true;
};
template <>
struct WgmmaType<fp16> {
  static constexpr bool kBf16 = false;
};

#define FA_WG_R0   \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define FA_WG_R0_16 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define FA_WG_R32   \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define FA_WG_R64   \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define FA_WG_R96   \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define FA_WG_F8(o)                                                                                      \
  "+f"(d[(o) + 0]), "+f"(d[(o) + 1]), "+f"(d[(o) + 2]), "+f"(d[(o) + 3]), "+f"(d[(o) + 4]), "+f"(d[(o) + 5]), \
      "+f"(d[(o) + 6]), "+f"(d[(o) + 7])
#define FA_WG_F32(o) FA_WG_F8(o), FA_WG_F8((o) + 8), FA_WG_F8((o) + 16), FA_WG_F8((o) + 24)

// SS: A and B from shared-memory descriptors. Operands: d (N/2), da, db, scale_d, trans-a, trans-b.
#define FA_WG_SS(NN, TY, REGS, DA, DB, SC, TA, TB, ...)                                                        \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SC ", 0;\nwgmma.mma_async.sync.aligned.m64n" NN "k16.f32." TY \
               "." TY " {" REGS "}, " DA ", " DB ", p, 1, 1, " TA ", " TB ";\n}\n"                             \
               : __VA_ARGS__                                                                                  \
               : "l"(da), "l"(db), "r"(scale_d), "n"(kTransA), "n"(kTransB))
// RS: A from four registers (bf16x2), B from a descriptor. Operands: d (N/2), a0..a3, db, scale_d,
// trans-b.
#define FA_WG_RS(NN, TY, REGS, A, DB, SC, TB, ...)                                                             \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SC ", 0;\nwgmma.mma_async.sync.aligned.m64n" NN "k16.f32." TY \
               "." TY " {" REGS "}, {" A "}, " DB ", p, 1, 1, " TB ";\n}\n"                                   \
               : __VA_ARGS__                                                                                  \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d), "n"(kTransB))

#define FA_WG_SS32(TY) \
  FA_WG_SS("32", TY, FA_WG_R0_16, "%16", "%17", "%18", "%19", "%20", FA_WG_F8(0), FA_WG_F8(8))
#define FA_WG_SS64(TY) FA_WG_SS("64", TY, FA_WG_R0, "%32", "%33", "%34", "%35", "%36", FA_WG_F32(0))
#define FA_WG_SS128(TY) FA_WG_SS("128", TY, FA_WG_R0 ", " FA_WG_R32, "%64", "%65", "%66", "%67", "%68", FA_WG_F32(0), \
                                 FA_WG_F32(32))
#define FA_WG_RS64(TY) FA_WG_RS("64", TY, FA_WG_R0, "%32, %33, %34, %35", "%36", "%37", "%38", FA_WG_F32(0))
#define FA_WG_RS128(TY)                                                                                     \
  FA_WG_RS("128", TY, FA_WG_R0 ", " FA_WG_R32, "%64, %65, %66, %67", "%68", "%69", "%70", FA_WG_F32(0), \
           FA_WG_F32(32))
#define FA_WG_RS192(TY)                                                                                      \
  FA_WG_RS("192", TY, FA_WG_R0 ", " FA_WG_R32 ", " FA_WG_R64, "%96, %97, %98, %99", "%100", "%101", "%102", \
           FA_WG_F32(0), FA_WG_F32(32), FA_WG_F32(64))
#define FA_WG_RS256(TY)                                                                                    \
  FA_WG_RS("256", TY, FA_WG_R0 ", " FA_WG_R32 ", " FA_WG_R64 ", " FA_WG_R96, "%128, %129, %130, %131",   \
           "%132", "%133", "%134", FA_WG_F32(0), FA_WG_F32(32), FA_WG_F32(64), FA_WG_F32(96))

// d (+)= A * B for one k16 step; scale_d = 0 overwrites d. kTransB = 1 for an MN-major B, kTransA = 1
// for an MN-major A (the backward's dQ = dS K reads dS^T from shared memory). N is the shape actually
// needed by the kernels: 64 / 128 (the kv tile of Q K^T, the head dims of the backward's GEMMs), 32 (the
// wide backward's S^T / dP^T halves).
template <class T, int N, int kTransB, int kTransA = 0>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], unsigned long long da, unsigned long long db,
                                         int scale_d) {
  static_assert(N == 32 || N == 64 || N == 128, "wgmma_ss: add the shape to ptx/wgmma.cuh");
  if constexpr (N == 32) {
    if constexpr (WgmmaType<T>::kBf16) FA_WG_SS32("bf16"); else FA_WG_SS32("f16");
  } else if constexpr (N == 64) {
    if constexpr (WgmmaType<T>::kBf16) FA_WG_SS64("bf16"); else FA_WG_SS64("f16");
  } else {
    if constexpr (WgmmaType<T>::kBf16) FA_WG_SS128("bf16"); else FA_WG_SS128("f16");
  }
}

// The same with A from registers (RS); N = 64 / 128 / 192 / 256 (the value head dim of P V).
template <class T, int N, int kTransB>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const unsigned (&a)[4], unsigned long long db,
                                         int scale_d) {
  static_assert(N == 64 || N == 128 || N == 192 || N == 256, "wgmma_rs: add the shape to ptx/wgmma.cuh");
  if constexpr (N == 64) {
    if constexpr (WgmmaType<T>::kBf16) FA_WG_RS64("bf16"); else FA_WG_RS64("f16");
  } else if constexpr (N == 128) {
    if constexpr (WgmmaType<T>::kBf16) FA_WG_RS128("bf16"); else FA_WG_RS128("f16");
  } else if constexpr (N == 192) {
    if constexpr (WgmmaType<T>::kBf16) FA_WG_RS192("bf16"); else FA_WG_RS192("f16");
  } else {
    if constexpr (WgmmaType<T>::kBf16) FA_WG_RS256("bf16"); else FA_WG_RS256("f16");
  }
}

}  // namespace flexattn::kern::sm90

#undef FA_WG_SS32
#undef FA_WG_SS64
#undef FA_WG_SS128
#undef FA_WG_RS64
#undef FA_WG_RS128
#undef FA_WG_RS192
#undef FA_WG_RS256
#undef FA_WG_SS
#undef FA_WG_RS
#undef FA_WG_F32
#undef FA_WG_F8
#undef FA_WG_R0
#undef FA_WG_R0_16
#undef FA_WG_R32
#undef FA_WG_R64
#undef FA_WG_R96
