#pragma once
// Split-KV combine: merges the fp32 partials of every split of a row (attn_decode.cuh) into out / lse /
// max_score. One warp per row. Weights are exp2(m_s - max_s m_s) with the -inf guard of the forward
// (a split that saw nothing has m = -inf, l = 0 and weight 0); a row no split attended has l = 0 and
// gets out = 0, lse = max = -inf, as in the main kernels.
#include "common/numeric.cuh"
#include "common/params.h"
#include "decode/decode_config.h"

namespace flexattn::kern {

template <class T, int Dv>
__device__ __forceinline__ void attn_decode_combine(const AttnParams& p) {
  const int lane = threadIdx.x & 31;
  const long long R = (long long)p.B * p.Hq * p.L;
  const long long row = (long long)blockIdx.x * kDecodeCombineWarps + (threadIdx.x >> 5);
  if (row >= R) return;
  const int ns = p.num_splits;
  const float* ml = p.part_ml + row * 2;
  float g = neg_inf();
  for (int s = lane; s < ns; s += 32) g = fmaxf(g, ml[s * R * 2]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) g = fmaxf(g, __shfl_xor_sync(0xffffffffu, g, o));
  const float gu = g == neg_inf() ? 0.f : g;
  float total = 0.f;
  for (int s = lane; s < ns; s += 32) total += ml[s * R * 2 + 1] * fast_exp2(ml[s * R * 2] - gu);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) total += __shfl_xor_sync(0xffffffffu, total, o);
  const float inv = total > 0.f ? 1.f / total : 0.f;

  const int i = (int)(row % p.L), h = (int)((row / p.L) % p.Hq), b = (int)(row / ((long long)p.L * p.Hq));
  unsigned char* go = (unsigned char*)p.out + 2 * ((long long)b * p.out_sb + (long long)h * p.out_sh + (long long)i * p.out_sl);
  for (int c = lane * 4; c < Dv; c += 128) {
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s = 0; s < ns; ++s) {
      const float w = fast_exp2(ml[s * R * 2] - gu);
      if (w == 0.f) continue;  // also skips the partials of splits that saw nothing
      const float4 x = *reinterpret_cast<const float4*>(p.part_o + (s * R + row) * Dv + c);
      acc.x += w * x.x, acc.y += w * x.y, acc.z += w * x.z, acc.w += w * x.w;
    }
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
