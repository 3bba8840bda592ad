#pragma once
// Split-KV combine: merges the fp32 partials of every split of a row (attn_decode.cuh) into out / lse /
// max_score. One warp per row. Weights are exp2(m_s - max_s m_s) with the -inf guard of the forward
// (a split that saw nothing has m = -inf, l = 0 and weight 0); a row no split attended has l = 0 and
// gets out = 0, lse = max = -inf, as in the main kernels.
//
// Latency, not bandwidth, is the cost here (B=1 x 128k: 32 rows, ~43 splits, 0.7 MB of partials): the
// weights are computed once per split (lanes over splits) into shared memory, and the partials are read
// with loads that do not depend on a weight (every split's CTA writes its partials, zeros when it saw
// nothing), unrolled by 8 so eight L2 round trips overlap. Before, each split cost two dependent L2
// round trips (max / sum, then a load behind an `if (w == 0) continue`): ~86 for 43 splits.
#include "common/numeric.cuh"
#include "common/params.h"
#include "decode/decode_config.h"

// FLEXATTN_DECODE_COMBINE_BATCH=1 in the generated source (env FLEXATTN_DECODE_COMBINE_BATCH): the partials
// are read in chunks of 16 splits whose loads are all issued before any is used (below).
#ifndef FLEXATTN_DECODE_COMBINE_BATCH
#define FLEXATTN_DECODE_COMBINE_BATCH 0
#endif

namespace flexattn::kern {

// Programmatic dependent launch (sm_90+): the combine may be launched while the split kernel still runs
// (FLEXATTN_DECODE_PDL); it waits here until that grid has completed and its writes are visible. A
// no-op when launched without the attribute, and compiled out below sm_90.
__device__ __forceinline__ void decode_wait_primary() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

template <class T, int Dv>
__device__ __forceinline__ void attn_decode_combine(const AttnParams& p) {
  static_assert(kDecodeMaxSplits % 32 == 0, "whole warps of splits");
  constexpr int kPerLane = kDecodeMaxSplits / 32;
  __shared__ float s_w[kDecodeCombineWarps][kDecodeMaxSplits];
  decode_wait_primary();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long R = (long long)p.B * p.Hq * p.L;
  const long long row = (long long)blockIdx.x * kDecodeCombineWarps + warp;
  if (row >= R) return;  // warp-uniform; no block barrier below
  const int ns = p.num_splits;
  // (max, sum) of splits lane, lane + 32, ...: all loads issued before any is used.
  float2 ml[kPerLane];
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int s = lane + 32 * k;
    ml[k] = s < ns ? *reinterpret_cast<const float2*>(p.part_ml + (s * R + row) * 2) : make_float2(neg_inf(), 0.f);
  }
  float g = neg_inf();
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) g = fmaxf(g, ml[k].x);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) g = fmaxf(g, __shfl_xor_sync(0xffffffffu, g, o));
  const float gu = g == neg_inf() ? 0.f : g;
  float total = 0.f;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int s = lane + 32 * k;
    const float w = fast_exp2(ml[k].x - gu);  // exp2(-inf) = 0: a split that saw nothing
    total += ml[k].y * w;
    if (s < ns) s_w[warp][s] = w;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) total += __shfl_xor_sync(0xffffffffu, total, o);
  __syncwarp();
  const float inv = total > 0.f ? 1.f / total : 0.f;

  const int i = (int)(row % p.L), h = (int)((row / p.L) % p.Hq), b = (int)(row / ((long long)p.L * p.Hq));
  unsigned char* go = (unsigned char*)p.out + 2 * ((long long)b * p.out_sb + (long long)h * p.out_sh + (long long)i * p.out_sl);
  const float* po = p.part_o + row * Dv;
  for (int c = lane * 4; c < Dv; c += 128) {
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#if FLEXATTN_DECODE_COMBINE_BATCH
    // Chunks of kChunk splits, loads predicated on s < ns and all issued before the first use: one L2
    // round trip per chunk (1x128k's 43 splits: 3). The loop below (unroll 8 over a runtime count) runs
    // fewer than 8 splits (8x8k: 6) and every remainder in its rolled remainder loop, one round trip per
    // split (SASS: one LDG.E.128 in that loop). Same order of accumulation, so the same results.
    constexpr int kChunk = 16;
    for (int s0 = 0; s0 < ns; s0 += kChunk) {
      float4 x[kChunk];
#pragma unroll
      for (int u = 0; u < kChunk; ++u)
        x[u] = s0 + u < ns ? *reinterpret_cast<const float4*>(po + (s0 + u) * R * Dv + c)
                           : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int u = 0; u < kChunk; ++u) {
        const float w = s0 + u < ns ? s_w[warp][s0 + u] : 0.f;
        if (w != 0.f) acc.x += w * x[u].x, acc.y += w * x[u].y, acc.z += w * x[u].z, acc.w += w * x[u].w;
      }
    }
#else
#pragma unroll 8
    for (int s = 0; s < ns; ++s) {
      const float4 x = *reinterpret_cast<const float4*>(po + s * R * Dv + c);
      const float w = s_w[warp][s];
      if (w != 0.f) acc.x += w * x.x, acc.y += w * x.y, acc.z += w * x.z, acc.w += w * x.w;  // skip as before
    }
#endif
    uint2 packed;
    packed.x = Num<T>::pack(acc.x * inv, acc.y * inv);
    packed.y = Num<T>::pack(acc.z * inv, acc.w * inv);
    *reinterpret_cast<uint2*>(go + 2 * c) = packed;
  }
  if (lane == 0) {
    if (p.lse != nullptr) p.lse[row] = total > 0.f ? (g + log2f(total)) * kLn2 : neg_inf();
    if (p.max_score != nullptr) p.max_score[row] = total > 0.f ? g * kLn2 : neg_inf();
  }
}

}  // namespace flexattn::kern
