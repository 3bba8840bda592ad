#pragma once
// Sums along the diagonals of one warp's 16 x 64 part of a wgmma m64n64 fp32 accumulator tile, for the
// buffer gradients whose index depends on the positions only through q_idx - kv_idx (relative bias,
// T5; codegen's kBufferGradReduce == 2): 79 sums per warp instead of 512 per-entry atomics.
//
// Accumulator layout (sm90/ptx/wgmma.cuh): lane (g = lane / 4, t = lane % 4) holds c[4i + 2r + cb] at
// row g + 8r and column 8i + 2t + cb (i < 8, r, cb < 2). Column - row = 8 (i - r) + (p - g) with
// p = 2t + cb. The thread first sums the entries of equal i - r and cb (diag_accumulate):
//   m[2 (i - r + 1) + cb], i - r = -1 .. 7  (18 partial sums).
// diag_reduce_warp then, with 20 shuffles and no shared memory:
//   1. folds each lane's sums into its row's cyclic frame: N[j][cb], j = 0..9, holds the entries of
//      column - row = 8 (j - 2) + ((p - g) & 7) (entries with p < g move to the slot below);
//   2. sums the 8 rows g of every (j, k = (p - g) & 7): a reduce-scatter over lane bits 4, 3, 2
//      (rows g ^ 4, g ^ 2, g ^ 1). Row g' holds k at p' = p + (g' - g) mod 8, so the partner lane is
//      t ^ 2 for g ^ 4, t -+ 1 for g ^ 2, and for g ^ 1 the other cb of lane t or t -+ 1. Each step
//      keeps half of the j slots (10 -> 5 -> 3 -> 2 or fewer; a missing slot is 0).
// Result: lane (g, t) holds out[u][cb], u < n, the complete sum of column - row
//   = 8 (j0 + u - 2) + ((2t + cb - g) & 7)
// over the warp's 16 rows. Every diagonal -15 .. 63 appears exactly once over the warp (plus the slot
// j = 0, k = 0, always 0). The order of the additions is fixed: the result is bitwise reproducible.
// The same code runs on the host (tests/unit/codegen/test_diag_reduce.cc) with a simulated shuffle.
#include "common/mod_ops.cuh"

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define FA_UNROLL _Pragma("unroll")
#else
#define FA_UNROLL
#endif

namespace flexattn::kern {

constexpr int kDiagPartials = 18;  // per-thread partial sums (diag_accumulate)

// Entry (i, e) of the accumulator (row g + 8 (e >> 1), column 8i + 2t + (e & 1)) into its partial sum.
template <int I, int E>
FA_MOD_FN void diag_accumulate(float (&m)[kDiagPartials], float c) {
  m[2 * (I - (E >> 1) + 1) + (E & 1)] += c;
}
FA_MOD_FN void diag_accumulate(float (&m)[kDiagPartials], int i, int e, float c) {
  m[2 * (i - (e >> 1) + 1) + (e & 1)] += c;
}

struct DiagSums {
  float out[2][2];  // [u][cb]
  int j0, n;        // slots j0 .. j0 + n - 1 (n <= 2)
};

// Column - row of out[u][cb] on lane (g, t), relative to the warp's row 0 / column 0.
FA_MOD_FN int diag_of(const DiagSums& d, int u, int cb, int lane) {
  const int g = lane >> 2, t = lane & 3;
  return 8 * (d.j0 + u - 2) + ((2 * t + cb - g) & 7);
}

// Shfl: float operator()(float v, int src_lane) returning src_lane's v (all 32 lanes call it).
template <class Shfl>
FA_MOD_FN DiagSums diag_reduce_warp(const float (&m)[kDiagPartials], int lane, const Shfl& shfl) {
  const int g = lane >> 2, t = lane & 3;
  // 1. The row's cyclic frame: N[j][cb] = p >= g ? m-slot j - 1 : m-slot j (slots -1 and 9 are 0).
  float n[10][2];
FA_UNROLL
  for (int cb = 0; cb < 2; ++cb) {
    const bool upper = 2 * t + cb >= g;
FA_UNROLL
    for (int j = 0; j < 10; ++j) {
      const float lo = j >= 1 ? m[2 * (j - 1) + cb] : 0.f, hi = j <= 8 ? m[2 * j + cb] : 0.f;
      n[j][cb] = upper ? lo : hi;
    }
  }
  // 2a. Rows g and g ^ 4: partner lane ^ 18 (t ^ 2), same cb; keep j 0..4 (g < 4) or 5..9.
  const bool b2 = (g & 4) != 0, b1 = (g & 2) != 0, b0 = (g & 1) != 0;
  float y[6][2];
FA_UNROLL
  for (int cb = 0; cb < 2; ++cb) {
FA_UNROLL
    for (int u = 0; u < 5; ++u) {
      const float keep = b2 ? n[5 + u][cb] : n[u][cb], send = b2 ? n[u][cb] : n[5 + u][cb];
      y[u][cb] = keep + shfl(send, lane ^ 18);
    }
    y[5][cb] = 0.f;
  }
  // 2b. Rows g and g ^ 2: partner column shift of +-2 (t +- 1), same cb; keep 0..2 or 3..4 (+ a 0).
  const int src2 = ((g ^ 2) << 2) | ((t + (b1 ? 3 : 1)) & 3);
  float z[4][2];
FA_UNROLL
  for (int cb = 0; cb < 2; ++cb) {
FA_UNROLL
    for (int u = 0; u < 3; ++u) {
      const float keep = b1 ? y[3 + u][cb] : y[u][cb], send = b1 ? y[u][cb] : y[3 + u][cb];
      z[u][cb] = keep + shfl(send, src2);
    }
    z[3][cb] = 0.f;
  }
  // 2c. Rows g and g ^ 1: column shift of +-1. Output cb 0 takes the partner's cb 1 (lane t for even g,
  // t - 1 for odd), output cb 1 its cb 0 (lane t + 1 for even g, t for odd); keep 0..1 or 2..3.
  const int src_c0 = ((g ^ 1) << 2) | (b0 ? ((t + 3) & 3) : t);
  const int src_c1 = ((g ^ 1) << 2) | (b0 ? t : ((t + 1) & 3));
  DiagSums d;
FA_UNROLL
  for (int u = 0; u < 2; ++u) {
    const float keep0 = b0 ? z[2 + u][0] : z[u][0], keep1 = b0 ? z[2 + u][1] : z[u][1];
    d.out[u][0] = keep0 + shfl(b0 ? z[u][1] : z[2 + u][1], src_c0);
    d.out[u][1] = keep1 + shfl(b0 ? z[u][0] : z[2 + u][0], src_c1);
  }
  d.j0 = (b2 ? 5 : 0) + (b1 ? 3 : 0) + (b0 ? 2 : 0);
  d.n = b0 ? (b1 ? 0 : 1) : 2;
  return d;
}

// A warpgroup's four warps (rows 16 w ..) side by side: warp diagonal d (-16 .. 63, diag_of) in slot d + 16 of the
// warp's kWgDiagSlots; warpgroup diagonal dg (column - row from the warpgroup's row 0, -63 .. 63) is warp w's
// diagonal dg + 16 w, present where that slot is in [1, kWgDiagSlots) (slot 0 is the always-zero -16).
// (bwd_buffer_grad_sm90.cuh: bg_wg_store / bg_wg_flush; tests/unit/codegen/test_diag_reduce.cc.)
constexpr int kWgDiagSlots = 80;
FA_MOD_FN int wg_slot_of_warp_diag(int d) { return d + 16; }
FA_MOD_FN int warp_slot_of_wg_diag(int dg, int w) { return dg + 16 * w + 16; }

// Sum over the warp (kBufferGradReduce == 1: one index for the whole tile); every lane gets it.
template <class Shfl>
FA_MOD_FN float warp_sum(float v, int lane, const Shfl& shfl) {
FA_UNROLL
  for (int o = 16; o >= 1; o >>= 1) v += shfl(v, lane ^ o);
  return v;
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
struct WarpShfl {
  __device__ __forceinline__ float operator()(float v, int src) const { return __shfl_sync(0xffffffffu, v, src); }
};
#endif

}  // namespace flexattn::kern
