#pragma once
// Row-parallel backward helpers, sm80 family.
//  preprocess: delta = rowsum(O * dO) - dlse (fp32 over the rounded 16-bit values), and zeroes the
//              dQ accumulator rows (when there is one) so the main kernel can add into them, and the
//              sm90 backward's ordered-dQ semaphores (p.dq_sem, deterministic mode); with p.dq_claim it opens
//              the claim words of the query tiles with few writers instead of clearing their rows.
//  dq convert: dq = dtype(scale * dq_accum) (0 in query tiles no writer claimed).
//  Both read the real head dims p.D / p.Dv at run time: the sm90 backward runs padded dims on the next compiled kernel
//  (D, Dv the kernel's), with the accumulator at the kernel's D.
#include "common/numeric.cuh"
#include "common/params.h"
#include "sm80/tile_config.h"
#include "sm90/bwd_dq_claim_rule_sm90.h"
#include "sm90/bwd_dq_order_sm90.h"

namespace flexattn::kern {

template <class T>
__device__ __forceinline__ float dot8(uint4 x, uint4 y) {
  return Num<T>::lo(x.x) * Num<T>::lo(y.x) + Num<T>::hi(x.x) * Num<T>::hi(y.x) + Num<T>::lo(x.y) * Num<T>::lo(y.y) +
         Num<T>::hi(x.y) * Num<T>::hi(y.y) + Num<T>::lo(x.z) * Num<T>::lo(y.z) + Num<T>::hi(x.z) * Num<T>::hi(y.z) +
         Num<T>::lo(x.w) * Num<T>::lo(y.w) + Num<T>::hi(x.w) * Num<T>::hi(y.w);
}

template <class T, int D, int Dv>
__device__ __forceinline__ void attn_bwd_preprocess_sm80(const AttnParams& p) {
  constexpr int kWarps = kSm80AuxThreads / 32, kRowsPerWarp = kSm80PreprocessRows / kWarps;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int h = blockIdx.y, b = blockIdx.z;
  if (p.dq_sem != nullptr && threadIdx.x == 0 && blockIdx.x == 0 && h == 0 && b == 0)
    p.dq_sem[sm90::bwd_dq_semaphores(p.B, p.Hq, p.L) - 1] = 0;  // the abandon word
  // Every row's O and dO loads are issued before the first is used: 4 rows in flight per warp instead of one (the
  // loop with a store per row keeps them in order; at D = 128 one row is 512 bytes, and with 64 warps per SM that
  // was ~32 KiB in flight per SM, short of an H200's bandwidth-latency product once the clear below went away).
  constexpr int kChunks = Dv / 8, kPerLane = (kChunks + 31) / 32;
  static_assert(kSm90BwdBlockM % kSm80PreprocessRows == 0, "a preprocess block inside one claimable query tile");
  const bool open = p.dq_claim != nullptr &&
                    sm90::bwd_dq_claim_initial(p, b, h, blockIdx.x * kSm80PreprocessRows) == sm90::kDqClaimOpen;
  uint4 ov[kRowsPerWarp][kPerLane], gv[kRowsPerWarp][kPerLane];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int q = blockIdx.x * kSm80PreprocessRows + warp * kRowsPerWarp + i;
    const uint4* o = reinterpret_cast<const uint4*>(
        (const unsigned char*)p.out + 2 * ((long long)b * p.out_sb + (long long)h * p.out_sh + (long long)q * p.out_sl));
    const uint4* g = reinterpret_cast<const uint4*>(
        (const unsigned char*)p.dout + 2 * ((long long)b * p.dout_sb + (long long)h * p.dout_sh + (long long)q * p.dout_sl));
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int c = lane + 32 * k;
      const bool in = q < p.L && c < kChunks && c * 8 < p.Dv;  // p.Dv < Dv: a padded sm90 backward's real dims
      ov[i][k] = in ? o[c] : make_uint4(0u, 0u, 0u, 0u);
      gv[i][k] = in ? g[c] : make_uint4(0u, 0u, 0u, 0u);
    }
  }
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int q = blockIdx.x * kSm80PreprocessRows + warp * kRowsPerWarp + i;
    if (q >= p.L) break;
    const long long row = ((long long)b * p.Hq + h) * p.L + q;
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) acc += dot8<T>(ov[i][k], gv[i][k]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0) p.delta[row] = acc - (p.dlse != nullptr ? p.dlse[row] : 0.f);
    if (p.dq_accum != nullptr && !open) {  // null in deterministic mode, unless the sm90 ordered reductions use it;
                                           // a tile open to claims is stored by its first writer
      float4* z = reinterpret_cast<float4*>(p.dq_accum + row * D);
      for (int c = lane; c < D / 4; c += 32) z[c] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    if (lane == 0 && q % kSm90BwdBlockM == 0) {
      const long long t = sm90::bwd_dq_semaphore_index(p.L, b * p.Hq + h, q);
      if (p.dq_sem != nullptr) p.dq_sem[t] = 0;
      if (p.dq_claim != nullptr) p.dq_claim[t] = open ? sm90::kDqClaimOpen : sm90::kDqClaimStored;
    }
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // With the sm90 backward's CTA order this grid is a programmatic dependent of the order's kernel
  // (launch_backward): one CTA, the grid's last, waits for that grid, so this grid does not complete before it.
  if (p.bwd_cta_order != nullptr && threadIdx.x == 0 && blockIdx.x == gridDim.x - 1 && h == gridDim.y - 1 &&
      b == gridDim.z - 1)
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

template <class T, int D>
__device__ __forceinline__ void attn_bwd_dq_convert_sm80(const AttnParams& p) {
  constexpr int kChunksPerRow = D / 8;
  constexpr int kTotal = kSm80ConvertRows * kChunksPerRow;
  constexpr int kItems = (kTotal + kSm80AuxThreads - 1) / kSm80AuxThreads;
  const int h = blockIdx.y, b = blockIdx.z;
  // A 32-row block lies inside one 64-row query tile: one claim word for the block (sm90/bwd_dq_claim_sm90.cuh: a
  // tile no dQ writer claimed has no contributions, and its accumulator rows were never cleared).
  static_assert(kSm90BwdBlockM % kSm80ConvertRows == 0, "a convert block inside one claimed query tile");
  const int q_block0 = blockIdx.x * kSm80ConvertRows;
  const bool unwritten =
      p.dq_claim != nullptr &&
      p.dq_claim[sm90::bwd_dq_semaphore_index(p.L, b * p.Hq + h, q_block0)] == sm90::kDqClaimOpen;
  // Every item's loads first (as the preprocess: in a loop with a store per item they stayed one at a time), issued
  // beside the claim word's load rather than after it (the rows exist either way; unwritten ones are dropped below).
  float4 xs[kItems], ys[kItems];
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int i = threadIdx.x + k * kSm80AuxThreads;
    const int q = q_block0 + i / kChunksPerRow, c = i % kChunksPerRow;
    const bool in = i < kTotal && q < p.L && c * 8 < p.D;
    const float4* src = reinterpret_cast<const float4*>(p.dq_accum + (((long long)b * p.Hq + h) * p.L + q) * D + c * 8);
    xs[k] = in ? src[0] : make_float4(0.f, 0.f, 0.f, 0.f);
    ys[k] = in ? src[1] : make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int i = threadIdx.x + k * kSm80AuxThreads;
    const int q = q_block0 + i / kChunksPerRow, c = i % kChunksPerRow;
    // p.D < D: a padded sm90 backward (sm90_bwd_padded_head_dim); the accumulator rows are D wide, dq's p.D.
    if (i >= kTotal || q >= p.L || c * 8 >= p.D) continue;
    const float s = p.scale;
    const float4 x = unwritten ? make_float4(0.f, 0.f, 0.f, 0.f) : xs[k];
    const float4 y = unwritten ? make_float4(0.f, 0.f, 0.f, 0.f) : ys[k];
    uint4 v;
    v.x = Num<T>::pack(x.x * s, x.y * s);
    v.y = Num<T>::pack(x.z * s, x.w * s);
    v.z = Num<T>::pack(y.x * s, y.y * s);
    v.w = Num<T>::pack(y.z * s, y.w * s);
    *reinterpret_cast<uint4*>((unsigned char*)p.dq +
                              2 * ((long long)b * p.dq_sb + (long long)h * p.dq_sh + (long long)q * p.dq_sl + c * 8)) = v;
  }
}

}  // namespace flexattn::kern
