#pragma once
// Epilogue of a consumer warpgroup: finish the row sums, write lse / max (natural log, -inf for fully
// masked rows, only rows < L), normalise O (0 for empty rows), round it to T into the warpgroup's own
// Q half (free once its last Q K^T retired) in the 128B-swizzled slab layout, and store it with TMA,
// whose bounds drop rows >= L: no row past the end is ever written. Once the store has read the staging
// tile, one arrival on q_free hands the Q half back to the producer for the CTA's next tile.
#include "common/numeric.cuh"
#include "common/params.h"
#include "sm90/fwd_layout_sm90.cuh"
#include "sm90/ptx/fence.cuh"
#include "sm90/ptx/mbarrier.cuh"
#include "sm90/ptx/smem.cuh"
#include "sm90/ptx/sreg.cuh"
#include "sm90/ptx/tma.cuh"

namespace flexattn::kern::sm90 {

// kFreshTid: the thread index (and so the rows' q) read again here instead of taken from the caller, so that the
// consumer does not hold its row index across the kv loop (tid_x_again). Only where that spilled: the tall tile's
// ALiBi with the rotated loop (session 27); elsewhere the kernels keep the SASS that was measured.
template <class T, int Dv, bool kFreshTid = false>
__device__ __forceinline__ void fwd_epilogue(const AttnParams& p, float (&o)[Dv / 2], const float (&m)[2],
                                             const float (&l)[2], unsigned stage_smem, unsigned q_free, int wg, int bar,
                                             int tid_in, int q0, int b, int h, const float (&m_lse)[2]) {
  const int tid = kFreshTid ? int(tid_x_again() & 127u) : tid_in;
  const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = l[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    inv[r] = sum > 0.f ? 1.f / sum : 0.f;
    const int q = q0 + 64 * wg + 16 * warp + g + 8 * r;
    if (t == 0 && q < p.L) {
      const long long row = ((long long)b * p.Hq + h) * p.L + q;
      if (p.lse != nullptr) p.lse[row] = sum > 0.f ? (m_lse[r] + log2f(sum)) * kLn2 : neg_inf();
      if (p.max_score != nullptr) p.max_score[row] = sum > 0.f ? m[r] * kLn2 : neg_inf();
    }
  }
  // Thread (g, t) of warp w holds, per 8-column atom i, row 16w+g (+8) and columns 8i+2t, +1: one
  // 4-byte piece of the 16-byte chunk i % 8 of slab i / 8, which the swizzle moves to chunk
  // (i % 8) ^ (row % 8). The 8 rows of a warp land in 8 distinct chunks: no bank conflicts.
#pragma unroll
  for (int i = 0; i < Dv / 8; ++i) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = 16 * warp + g + 8 * r;
      const unsigned addr = stage_smem + (i / 8) * (64 * 128) + row * 128 + (((i % 8) ^ (row & 7)) << 4) + 4 * t;
      st_shared_u32(addr, Num<T>::pack(o[4 * i + 2 * r] * inv[r], o[4 * i + 2 * r + 1] * inv[r]));
    }
  }
  fence_proxy_async_smem();
  named_bar_sync(bar, 128);
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < Dv / 64; ++s) tma_store_4d(&p.o_map, stage_smem + s * (64 * 128), 64 * s, q0 + 64 * wg, h, b);
    tma_store_commit();
    tma_store_wait_read();
    mbar_arrive(q_free);
  }
}

}  // namespace flexattn::kern::sm90
