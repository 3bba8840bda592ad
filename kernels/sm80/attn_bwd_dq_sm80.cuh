#pragma once
// Deterministic dQ pass, sm80 family: one CTA per (query tile, query head, batch) walks the forward kv
// lists like the forward kernel, recomputes S and dP = dO V^T, and accumulates dQ = dS K in registers
// (dS feeds the product straight from the accumulator layout). No atomics, fixed order: the result is
// bitwise identical run to run. buffer_grad is not called here (the dK/dV kernel already did).
#include "common/mask_iter.cuh"
#include "common/numeric.cuh"
#include "common/params.h"
#include "common/variant.cuh"
#include "sm80/scores_sm80.cuh"
#include "sm80/tile_config.h"
#include "sm80/tile_io.cuh"
#include "sm80/warp_gemm.cuh"

namespace flexattn::kern {

template <class V, class T, int D, int Dv, int BM = sm80_bwd_dq_tile(D, Dv).block_m,
          int BN = sm80_bwd_dq_tile(D, Dv).block_n, int NW = sm80_bwd_dq_tile(D, Dv).warps>
__device__ __forceinline__ void attn_bwd_dq_sm80(const AttnParams& p) {
  static_assert(D % 16 == 0 && Dv % 16 == 0 && D <= 256 && Dv <= 256, "head dims: multiples of 16, <= 256");
  static_assert(BM % (16 * NW) == 0 && BN % 16 == 0, "tile shape");
  constexpr int NT = NW * 32, MI = BM / NW / 16, NI = BN / 8, DI = D / 8;
  constexpr int SQ = D + 8, SO = Dv + 8, SK = D + 8, SV = Dv + 8;
  extern __shared__ __align__(128) unsigned char smem[];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int q0 = blockIdx.x * BM, h = blockIdx.y, b = blockIdx.z;
  if (q0 >= p.L) return;
  const int hk = h / (p.Hq / p.Hkv), bk = p.Bkv == 1 ? 0 : b;
  const unsigned sQ = smem_addr(smem), sO = sQ + BM * SQ * 2, sK = sO + BM * SO * 2, sV = sK + 2 * BN * SK * 2;
  const unsigned char* gk = (const unsigned char*)p.k + 2 * ((long long)bk * p.k_sb + (long long)hk * p.k_sh);
  const unsigned char* gv = (const unsigned char*)p.v + 2 * ((long long)bk * p.v_sb + (long long)hk * p.v_sh);
  auto load_kv = [&](int stage, int kv0) {
    load_tile_async<BN, D, SK, NT>(sK + stage * BN * SK * 2, gk + 2 * (long long)kv0 * p.k_sl, p.k_sl, p.S - kv0, tid);
    load_tile_async<BN, Dv, SV, NT>(sV + stage * BN * SV * 2, gv + 2 * (long long)kv0 * p.v_sl, p.v_sl, p.S - kv0, tid);
  };

  load_tile_async<BM, D, SQ, NT>(sQ, (const unsigned char*)p.q + 2 * ((long long)b * p.q_sb + (long long)h * p.q_sh + (long long)q0 * p.q_sl), p.q_sl, p.L - q0, tid);
  load_tile_async<BM, Dv, SO, NT>(sO, (const unsigned char*)p.dout + 2 * ((long long)b * p.dout_sb + (long long)h * p.dout_sh + (long long)q0 * p.dout_sl), p.dout_sl, p.L - q0, tid);
  cp_async_commit();
  TileWalker walk;
  init_kv_walker(walk, p, b, h, q0, BN);
  bool has = walk.next();
  if (has) load_kv(0, walk.start);
  cp_async_commit();

  const int row0 = warp * MI * 16;
  float lse2[MI][2], del[MI][2];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int q = q0 + row0 + mi * 16 + (lane >> 2) + r * 8;
      const long long row = ((long long)b * p.Hq + h) * p.L + q;
      lse2[mi][r] = q < p.L ? lse_to_log2(p.lse[row]) : pos_inf();
      del[mi][r] = q < p.L ? p.delta[row] : 0.f;
    }
  }
  float dq[MI][DI][4];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int di = 0; di < DI; ++di) dq[mi][di][0] = dq[mi][di][1] = dq[mi][di][2] = dq[mi][di][3] = 0.f;
  }

  int stage = 0;
  while (has) {
    const int kv0 = walk.start;
    const bool full = walk.full;
    has = walk.next();
    if (has) load_kv(stage ^ 1, walk.start);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const unsigned sKs = sK + stage * BN * SK * 2, sVs = sV + stage * BN * SV * 2;

    float s[MI][NI][4], dp[MI][NI][4];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mi][ni][e] = dp[mi][ni][e] = 0.f;
      }
    }
    gemm_ss<T, MI, NI, D, false, SQ, false, SK>(s, sQ, row0, sKs, 0, lane);
    gemm_ss<T, MI, NI, Dv, false, SO, false, SV>(dp, sO, row0, sVs, 0, lane);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int q = q0 + row0 + mi * 16 + (lane >> 2) + (e >> 1) * 8;
          const int kv = kv0 + ni * 8 + (lane & 3) * 2 + (e & 1);
          float pv, ds;
          if (full) {
            backward_entry<V, true>(p, s[mi][ni][e], dp[mi][ni][e], lse2[mi][e >> 1], del[mi][e >> 1], b, h, q, kv,
                                    false, pv, ds);
          } else {
            backward_entry<V, false>(p, s[mi][ni][e], dp[mi][ni][e], lse2[mi][e >> 1], del[mi][e >> 1], b, h, q, kv,
                                     false, pv, ds);
          }
          s[mi][ni][e] = ds;
        }
      }
    }
    unsigned a[MI][NI / 2][4];
    acc_to_a<T>(a, s);
    gemm_rs<T, MI, DI, NI / 2, true, SK>(dq, a, sKs, 0, lane);
    __syncthreads();
    stage ^= 1;
  }
  cp_async_wait<0>();
  __syncthreads();
  store_acc<T, SQ>(sQ, dq, row0, 0, lane, p.scale);
  __syncthreads();
  unsigned char* gdq = (unsigned char*)p.dq + 2 * ((long long)b * p.dq_sb + (long long)h * p.dq_sh + (long long)q0 * p.dq_sl);
  store_tile<BM, D, SQ, NT>(gdq, p.dq_sl, p.L - q0, sQ, tid);
}

}  // namespace flexattn::kern
