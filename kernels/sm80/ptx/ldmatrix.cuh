#pragma once
// ldmatrix (sm_75+): four 8x8 b16 matrices from shared memory into the mma fragment layout. Lanes
// 8i..8i+7 give the row addresses of matrix i; register i of lane t then holds row t/4, columns
// 2(t%4), 2(t%4)+1 of matrix i (.trans: column t/4, rows 2(t%4), 2(t%4)+1).
namespace flexattn::kern {

__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

__device__ __forceinline__ void ldsm_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

}  // namespace flexattn::kern
