#pragma once
// Forward attention, sm80 family (FlashAttention-2 schedule on mma.sync): one CTA per (query tile,
// query head, batch); each warp owns BM / NW query rows; K/V tiles stream through a 2-stage cp.async
// ring in block-mask order (partial tiles with mask_mod, then full tiles); online softmax in exp2;
// P rounded to the input dtype and fed from registers into the PV product.
#include "common/mask_iter.cuh"
#include "common/numeric.cuh"
#include "common/params.h"
#include "common/variant.cuh"
#include "sm80/scores_sm80.cuh"
#include "sm80/tile_config.h"
#include "sm80/tile_io.cuh"
#include "sm80/warp_gemm.cuh"

namespace flexattn::kern {

// One kv tile of the online softmax for MI row atoms: s (log2 units, -inf = masked) becomes P in
// place; m / l are the running max and partial row sum; o is rescaled by exp2(m_old - m_new). A row
// whose max is still -inf uses 0 as subtrahend, so exp2(-inf - 0) = 0 and nothing becomes NaN.
template <int MI, int NI, int DI>
__device__ __forceinline__ void softmax_step(float (&s)[MI][NI][4], float (&m)[MI][2], float (&l)[MI][2],
                                             float (&o)[MI][DI][4]) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = m[mi][r];
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) mx = fmaxf(mx, fmaxf(s[mi][ni][2 * r], s[mi][ni][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mu = mx == neg_inf() ? 0.f : mx;
      const float alpha = fast_exp2(m[mi][r] - mu);
      m[mi][r] = mx;
      float rs = 0.f;
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const float pv = fast_exp2(s[mi][ni][2 * r + j] - mu);
          s[mi][ni][2 * r + j] = pv;
          rs += pv;
        }
      }
      l[mi][r] = l[mi][r] * alpha + rs;
#pragma unroll
      for (int di = 0; di < DI; ++di) {
        o[mi][di][2 * r] *= alpha;
        o[mi][di][2 * r + 1] *= alpha;
      }
    }
  }
}

template <class V, bool kFull, int MI, int NI>
__device__ __forceinline__ void fwd_scores(float (&s)[MI][NI][4], const AttnParams& p, int b, int h,
                                           const int (&qw)[MI][2], int kv0, int lane) {
  const bool tail = kv0 + NI * 8 > p.S;
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int kv = kv0 + ni * 8 + (lane & 3) * 2 + (e & 1);
        const bool in_bounds = !tail || kv < p.S;
        const int kvw = (tail ? wrap_index(kv, p.S) : kv) + p.kv_offset;
        s[mi][ni][e] = masked_score_log2<V, kFull>(p, s[mi][ni][e], b, h, qw[mi][e >> 1], kvw, in_bounds);
      }
    }
  }
}

template <class V, class T, int D, int Dv, int BM = sm80_fwd_tile(D, Dv).block_m,
          int BN = sm80_fwd_tile(D, Dv).block_n, int NW = sm80_fwd_tile(D, Dv).warps>
__device__ __forceinline__ void attn_fwd_sm80(const AttnParams& p) {
  static_assert(D % 16 == 0 && Dv % 16 == 0 && D <= 256 && Dv <= 256, "head dims: multiples of 16, <= 256");
  static_assert(BM % (16 * NW) == 0 && BN % 16 == 0, "tile shape");
  constexpr int NT = NW * 32, MI = BM / NW / 16, NI = BN / 8, DI = Dv / 8;
  constexpr int SQ = (D > Dv ? D : Dv) + 8, SK = D + 8, SV = Dv + 8;
  extern __shared__ __align__(128) unsigned char smem[];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int q0 = blockIdx.x * BM, h = blockIdx.y, b = blockIdx.z;
  if (q0 >= p.L) return;
  const int hk = h / (p.Hq / p.Hkv), bk = p.Bkv == 1 ? 0 : b;
  const unsigned char* gq = (const unsigned char*)p.q + 2 * ((long long)b * p.q_sb + (long long)h * p.q_sh + (long long)q0 * p.q_sl);
  const unsigned char* gk = (const unsigned char*)p.k + 2 * ((long long)bk * p.k_sb + (long long)hk * p.k_sh);
  const unsigned char* gv = (const unsigned char*)p.v + 2 * ((long long)bk * p.v_sb + (long long)hk * p.v_sh);
  const unsigned sQ = smem_addr(smem), sK = sQ + BM * SQ * 2, sV = sK + 2 * BN * SK * 2;

  auto load_kv = [&](int stage, int kv0) {
    load_tile_async<BN, D, SK, NT>(sK + stage * BN * SK * 2, gk + 2 * (long long)kv0 * p.k_sl, p.k_sl, p.S - kv0, tid);
    load_tile_async<BN, Dv, SV, NT>(sV + stage * BN * SV * 2, gv + 2 * (long long)kv0 * p.v_sl, p.v_sl, p.S - kv0, tid);
  };

  load_tile_async<BM, D, SQ, NT>(sQ, gq, p.q_sl, p.L - q0, tid);
  cp_async_commit();
  TileWalker walk;
  init_kv_walker(walk, p, b, h, q0, BN);
  bool has = walk.next();
  if (has) load_kv(0, walk.start);
  cp_async_commit();

  const int row0 = warp * MI * 16;
  int qw[MI][2];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int r = 0; r < 2; ++r) qw[mi][r] = wrap_index(q0 + row0 + mi * 16 + (lane >> 2) + r * 8, p.L) + p.q_offset;
  }
  float o[MI][DI][4], m[MI][2], l[MI][2];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int di = 0; di < DI; ++di) o[mi][di][0] = o[mi][di][1] = o[mi][di][2] = o[mi][di][3] = 0.f;
    m[mi][0] = m[mi][1] = neg_inf();
    l[mi][0] = l[mi][1] = 0.f;
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

    float s[MI][NI][4];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) s[mi][ni][0] = s[mi][ni][1] = s[mi][ni][2] = s[mi][ni][3] = 0.f;
    }
    gemm_ss<T, MI, NI, D, false, SQ, false, SK>(s, sQ, row0, sK + stage * BN * SK * 2, 0, lane);
    if (full) {
      fwd_scores<V, true>(s, p, b, h, qw, kv0, lane);
    } else {
      fwd_scores<V, false>(s, p, b, h, qw, kv0, lane);
    }
    softmax_step(s, m, l, o);
    unsigned a[MI][NI / 2][4];
    acc_to_a<T>(a, s);
    gemm_rs<T, MI, DI, NI / 2, true, SV>(o, a, sV + stage * BN * SV * 2, 0, lane);
    __syncthreads();
    stage ^= 1;
  }
  cp_async_wait<0>();
  __syncthreads();

  // Epilogue: normalise, write lse / max (natural log), stage O through the Q tile, store rows < L.
  float inv[MI][2];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sum = l[mi][r];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      inv[mi][r] = sum > 0.f ? 1.f / sum : 0.f;
      const int q = q0 + row0 + mi * 16 + (lane >> 2) + r * 8;
      if ((lane & 3) == 0 && q < p.L) {
        const long long row = ((long long)b * p.Hq + h) * p.L + q;
        if (p.lse != nullptr) p.lse[row] = sum > 0.f ? (m[mi][r] + log2f(sum)) * kLn2 : neg_inf();
        if (p.max_score != nullptr) p.max_score[row] = sum > 0.f ? m[mi][r] * kLn2 : neg_inf();
      }
    }
  }
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int di = 0; di < DI; ++di) {
      o[mi][di][0] *= inv[mi][0];
      o[mi][di][1] *= inv[mi][0];
      o[mi][di][2] *= inv[mi][1];
      o[mi][di][3] *= inv[mi][1];
    }
  }
  store_acc<T, SQ>(sQ, o, row0, 0, lane, 1.f);
  __syncthreads();
  unsigned char* go = (unsigned char*)p.out + 2 * ((long long)b * p.out_sb + (long long)h * p.out_sh + (long long)q0 * p.out_sl);
  store_tile<BM, Dv, SQ, NT>(go, p.out_sl, p.L - q0, sQ, tid);
}

}  // namespace flexattn::kern
