#pragma once
// Backward attention, sm80 family, main kernel: one CTA per (kv tile, kv head, kv batch) keeps K, V
// and the fp32 dK / dV accumulators resident and walks every query tile that attends it: the G query
// heads of the group, all batches when Bkv == 1, each through the transposed block lists (partial,
// then full). Scores are computed transposed (S^T = K Q^T, dP^T = V dO^T) so rows are kv positions;
// P^T and dS^T go through shared memory once and feed dV += P^T dO, dK += dS^T Q and, unless
// deterministic, dQ += dS K (fp32 atomics into dq_accum, scaled in the convert kernel).
//
// Including this header gives every backward entry (preprocess, main, deterministic dQ, convert).
#include "common/mask_iter.cuh"
#include "common/numeric.cuh"
#include "common/params.h"
#include "common/variant.cuh"
#include "sm80/attn_bwd_aux_sm80.cuh"
#include "sm80/attn_bwd_dq_sm80.cuh"
#include "sm80/scores_sm80.cuh"
#include "sm80/tile_config.h"
#include "sm80/tile_io.cuh"
#include "sm80/warp_gemm.cuh"

namespace flexattn::kern {

struct QTileRef {
  int b, h, q0;
  bool full;
};

// The query tiles that attend kv tile kv0 of kv head hk, in order: batch, head of the group, list.
struct BwdTileIter {
  TileWalker walk;
  int b, b_end, g, G, hk, kv0, tile;
  bool done;
  QTileRef cur;

  __device__ __forceinline__ void init(const AttnParams& p, int bz, int hk_, int kv0_, int tile_) {
    G = p.Hq / p.Hkv;
    hk = hk_;
    kv0 = kv0_;
    tile = tile_;
    b = p.Bkv == 1 ? 0 : bz;
    b_end = p.Bkv == 1 ? p.B : bz + 1;
    g = 0;
    done = false;
    init_q_walker(walk, p, b, hk * G, kv0, tile);
  }

  __device__ __forceinline__ bool next(const AttnParams& p) {
    while (!done) {
      if (walk.next<true>()) {  // merged: ascending query tiles (TileWalker)
        cur = QTileRef{b, hk * G + g, walk.start, walk.full};
        return true;
      }
      if (++g == G) {
        g = 0;
        if (++b >= b_end) {
          done = true;
          break;
        }
      }
      init_q_walker(walk, p, b, hk * G + g, kv0, tile);
    }
    return false;
  }
};

// Element-wise backward on a transposed warp tile (rows = kv, cols = query): st becomes P^T, dpt dS^T.
// kInB: the CTA's tile lies inside [0, L) x [0, S) (no bounds test, no index wrapping: mask_mod's buffer
// loads then sit behind no per-entry branch and equal ones are shared; the sm90 backward measured x1.8 on a
// document mask from that, bench/RESULTS.md session 11). mask_on = false: a full edge tile.
template <class V, bool kFull, bool kInB, int MI, int NI>
__device__ __forceinline__ void bwd_scores_t(float (&st)[MI][NI][4], float (&dpt)[MI][NI][4], const AttnParams& p,
                                             const QTileRef& t, int kv0, int r0, int c0, unsigned s_lse,
                                             unsigned s_delta, int lane, bool mask_on = true) {
  float lse2[NI][2], del[NI][2];
#pragma unroll
  for (int ni = 0; ni < NI; ++ni) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int col = c0 + ni * 8 + (lane & 3) * 2 + j;
      lse2[ni][j] = lse_to_log2(lds_f32(s_lse + col * 4));
      del[ni][j] = lds_f32(s_delta + col * 4);
    }
  }
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int kv = kv0 + r0 + mi * 16 + (lane >> 2) + (e >> 1) * 8;
        const int q = t.q0 + c0 + ni * 8 + (lane & 3) * 2 + (e & 1);
        backward_entry<V, kFull, kInB>(p, st[mi][ni][e], dpt[mi][ni][e], lse2[ni][e & 1], del[ni][e & 1], t.b, t.h,
                                       q, kv, true, st[mi][ni][e], dpt[mi][ni][e], 0.f, mask_on);
      }
    }
  }
}

template <int MI, int NI>
__device__ __forceinline__ void zero_acc(float (&c)[MI][NI][4]) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) c[mi][ni][0] = c[mi][ni][1] = c[mi][ni][2] = c[mi][ni][3] = 0.f;
  }
}

template <class V, class T, int D, int Dv, int BM = sm80_bwd_tile(D, Dv).block_m,
          int BN = sm80_bwd_tile(D, Dv).block_n, int NW = sm80_bwd_tile(D, Dv).warps,
          int ST = sm80_bwd_tile(D, Dv).stages>
__device__ __forceinline__ void attn_bwd_sm80(const AttnParams& p) {
  static_assert(D % 16 == 0 && Dv % 16 == 0 && D <= 256 && Dv <= 256, "head dims: multiples of 16, <= 256");
  static_assert(ST == 1 || ST == 2, "stages");
  constexpr int NT = NW * 32, SK = D + 8, SV = Dv + 8, SQ = D + 8, SO = Dv + 8, SP = BM + 8;
  using TS = WarpTile<BN, BM, NW>;  // S^T and dP^T
  using TK = WarpTile<BN, D, NW>;   // dK
  using TV = WarpTile<BN, Dv, NW>;  // dV
  using TQ = WarpTile<BM, D, NW>;   // dQ
  extern __shared__ __align__(128) unsigned char smem[];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int kv0 = blockIdx.x * BN, hk = blockIdx.y, bz = blockIdx.z;
  if (kv0 >= p.S) return;
  const unsigned sK = smem_addr(smem), sV = sK + BN * SK * 2, sQ = sV + BN * SV * 2, sO = sQ + ST * BM * SQ * 2;
  const unsigned sP = sO + ST * BM * SO * 2, sdS = sP + BN * SP * 2, sLse = sdS + BN * SP * 2,
                 sDel = sLse + ST * BM * 4;

  load_tile_async<BN, D, SK, NT>(sK, (const unsigned char*)p.k + 2 * ((long long)bz * p.k_sb + (long long)hk * p.k_sh + (long long)kv0 * p.k_sl), p.k_sl, p.S - kv0, tid);
  load_tile_async<BN, Dv, SV, NT>(sV, (const unsigned char*)p.v + 2 * ((long long)bz * p.v_sb + (long long)hk * p.v_sh + (long long)kv0 * p.v_sl), p.v_sl, p.S - kv0, tid);
  cp_async_commit();

  auto load_q = [&](int st, const QTileRef& t) {
    const long long rq = (long long)t.b * p.q_sb + (long long)t.h * p.q_sh + (long long)t.q0 * p.q_sl;
    const long long ro = (long long)t.b * p.dout_sb + (long long)t.h * p.dout_sh + (long long)t.q0 * p.dout_sl;
    const long long rr = ((long long)t.b * p.Hq + t.h) * p.L + t.q0;
    load_tile_async<BM, D, SQ, NT>(sQ + st * BM * SQ * 2, (const unsigned char*)p.q + 2 * rq, p.q_sl, p.L - t.q0, tid);
    load_tile_async<BM, Dv, SO, NT>(sO + st * BM * SO * 2, (const unsigned char*)p.dout + 2 * ro, p.dout_sl, p.L - t.q0, tid);
    load_row_f32_async<BM, NT>(sLse + st * BM * 4, p.lse + rr, p.L - t.q0, tid);
    load_row_f32_async<BM, NT>(sDel + st * BM * 4, p.delta + rr, p.L - t.q0, tid);
  };

  BwdTileIter it;
  it.init(p, bz, hk, kv0, BM);
  bool has = it.next(p);
  if constexpr (ST == 2) {
    if (has) load_q(0, it.cur);
    cp_async_commit();
  }
  float dk[TK::MI][TK::NI][4], dv[TV::MI][TV::NI][4];
  zero_acc(dk);
  zero_acc(dv);
  const bool do_dq = p.deterministic == 0;

  int stage = 0;
  while (has) {
    const QTileRef t = it.cur;
    has = it.next(p);
    if constexpr (ST == 2) {
      if (has) load_q(stage ^ 1, it.cur);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      load_q(0, t);
      cp_async_commit();
      cp_async_wait<0>();
    }
    __syncthreads();
    const unsigned sQs = sQ + stage * BM * SQ * 2, sOs = sO + stage * BM * SO * 2;

    {
      float st[TS::MI][TS::NI][4], dpt[TS::MI][TS::NI][4];
      zero_acc(st);
      zero_acc(dpt);
      const int r0 = TS::row0(warp), c0 = TS::col0(warp);
      gemm_ss<T, TS::MI, TS::NI, D, false, SK, false, SQ>(st, sK, r0, sQs, c0, lane);
      gemm_ss<T, TS::MI, TS::NI, Dv, false, SV, false, SO>(dpt, sV, r0, sOs, c0, lane);
      const unsigned s_lse = sLse + stage * BM * 4, s_del = sDel + stage * BM * 4;
      const bool full = t.full || !V::kHasMaskMod;
      if (kv0 + BN <= p.S && t.q0 + BM <= p.L) {
        if (full)
          bwd_scores_t<V, true, true>(st, dpt, p, t, kv0, r0, c0, s_lse, s_del, lane);
        else
          bwd_scores_t<V, false, true>(st, dpt, p, t, kv0, r0, c0, s_lse, s_del, lane);
      } else {
        bwd_scores_t<V, false, false>(st, dpt, p, t, kv0, r0, c0, s_lse, s_del, lane, !full);
      }
      store_acc<T, SP>(sP, st, r0, c0, lane, 1.f);
      store_acc<T, SP>(sdS, dpt, r0, c0, lane, 1.f);
    }
    __syncthreads();
    gemm_ss<T, TV::MI, TV::NI, BM, false, SP, true, SO>(dv, sP, TV::row0(warp), sOs, TV::col0(warp), lane);
    gemm_ss<T, TK::MI, TK::NI, BM, false, SP, true, SQ>(dk, sdS, TK::row0(warp), sQs, TK::col0(warp), lane);
    if (do_dq) {
      float dq[TQ::MI][TQ::NI][4];
      zero_acc(dq);
      const int r0 = TQ::row0(warp), c0 = TQ::col0(warp);
      gemm_ss<T, TQ::MI, TQ::NI, BN, true, SP, true, SK>(dq, sdS, r0, sK, c0, lane);
      float* acc = p.dq_accum + (((long long)t.b * p.Hq + t.h) * p.L + t.q0) * D;
#pragma unroll
      for (int mi = 0; mi < TQ::MI; ++mi) {
#pragma unroll
        for (int ni = 0; ni < TQ::NI; ++ni) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int row = r0 + mi * 16 + (lane >> 2) + (e >> 1) * 8, col = c0 + ni * 8 + (lane & 3) * 2 + (e & 1);
            if (t.q0 + row < p.L) atomicAdd(acc + (long long)row * D + col, dq[mi][ni][e]);
          }
        }
      }
    }
    __syncthreads();
    if constexpr (ST == 2) stage ^= 1;
  }
  cp_async_wait<0>();
  __syncthreads();

  // dK = scale * dS^T Q; both tiles staged through the K / V buffers (same shapes), rows < S stored.
  store_acc<T, SK>(sK, dk, TK::row0(warp), TK::col0(warp), lane, p.scale);
  store_acc<T, SV>(sV, dv, TV::row0(warp), TV::col0(warp), lane, 1.f);
  __syncthreads();
  unsigned char* gdk = (unsigned char*)p.dk + 2 * ((long long)bz * p.dk_sb + (long long)hk * p.dk_sh + (long long)kv0 * p.dk_sl);
  unsigned char* gdv = (unsigned char*)p.dv + 2 * ((long long)bz * p.dv_sb + (long long)hk * p.dv_sh + (long long)kv0 * p.dv_sl);
  store_tile<BN, D, SK, NT>(gdk, p.dk_sl, p.S - kv0, sK, tid);
  store_tile<BN, Dv, SV, NT>(gdv, p.dv_sl, p.S - kv0, sV, tid);
}

}  // namespace flexattn::kern
