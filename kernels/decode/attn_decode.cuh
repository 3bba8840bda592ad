#pragma once
// Decode attention (short queries, split-KV), sm_80+ on mma.sync. One CTA per (row tile of the packed
// rows, batch x head group, kv split): the packed rows are pack_heads query heads x L query rows that
// share one kv head, so every K/V byte is read once per group. Each split walks its share of the
// block-sparse list (or of the kv tiles without a mask) through a 2-stage cp.async ring; pages of a
// paged cache are resolved per row at load time. With one split the CTA writes out / lse itself;
// otherwise it writes fp32 partials that decode_combine.cuh merges.
#include "common/mask_iter.cuh"
#include "common/numeric.cuh"
#include "common/params.h"
#include "common/variant.cuh"
#include "decode/decode_config.h"
#include "sm80/attn_fwd_sm80.cuh"
#include "sm80/scores_sm80.cuh"
#include "sm80/warp_gemm.cuh"

namespace flexattn::kern {

// Packed tile rows: row r of a head group is query head h0 + r / L, query row r % L; rows past
// pack_heads * L are padding (zero Q, never stored).
template <int ROWS, int COLS, int STR, int NT>
__device__ __forceinline__ void decode_load_q(unsigned dst, const AttnParams& p, int b, int h0, int r0, int tid) {
  constexpr int kCpr = COLS / 8, kTotal = ROWS * kCpr;
  const int rows = p.pack_heads * p.L;
  const unsigned char* base = (const unsigned char*)p.q + 2 * (long long)b * p.q_sb;
#pragma unroll
  for (int it = 0; it < (kTotal + NT - 1) / NT; ++it) {
    const int i = tid + it * NT;
    if (kTotal % NT == 0 || i < kTotal) {
      const int r = i / kCpr, c = i % kCpr, pr = r0 + r;
      const bool ok = pr < rows;
      const long long off = ok ? (long long)(h0 + pr / p.L) * p.q_sh + (long long)(pr % p.L) * p.q_sl + c * 8 : 0;
      cp_async_16(dst + (r * STR + c * 8) * 2, base + 2 * off, ok);
    }
  }
}

// The logical page of kv position pos (>= 0).
__device__ __forceinline__ int decode_page_of(const AttnParams& p, int pos) {
  return p.page_shift >= 0 ? pos >> p.page_shift : pos / p.page_size;
}

// One K or V tile of ROWS logical kv rows from kv0. pt: the sequence's page-table row (null:
// contiguous rows from base). Rows at or past kvl, and rows on a page id outside the pool, are
// zero-filled without reading memory (decode_scores masks the latter).
template <int ROWS, int COLS, int STR, int NT>
__device__ __forceinline__ void decode_load_kv(unsigned dst, const unsigned char* base, long long page_stride,
                                               long long row_stride, const int* pt, const AttnParams& p, int kv0,
                                               int kvl, int tid) {
  constexpr int kCpr = COLS / 8, kTotal = ROWS * kCpr;
#pragma unroll
  for (int it = 0; it < (kTotal + NT - 1) / NT; ++it) {
    const int i = tid + it * NT;
    if (kTotal % NT == 0 || i < kTotal) {
      const int r = i / kCpr, c = i % kCpr, pos = kv0 + r;
      bool ok = pos < kvl;
      long long off = 0;
      if (pt != nullptr) {
        const int pg = ok ? decode_page_of(p, pos) : 0;
        const int phys = ok ? __ldg(pt + pg) : 0;
        ok = ok && phys >= 0 && phys < p.num_pages;
        off = ok ? (long long)phys * page_stride + (long long)(pos - pg * p.page_size) * row_stride : 0;
      } else {
        off = (long long)pos * row_stride;
      }
      cp_async_16(dst + (r * STR + c * 8) * 2, ok ? base + 2 * (off + c * 8) : base, ok);
    }
  }
}

// This split's share of one list pass: entries [e, e1) of the concatenated (partial, full) lists, each
// expanded into block / tile compute tiles below kvl. Without a block mask the list is the identity
// over the kv tiles (every tile partial, as in the main kernels).
struct DecodeTiles {
  const int* idx0;
  const int* idx1;
  bool dense;  // no block mask: entry e is kv tile e
  int cnt0, e, e1, sub, subs, tile, kvl;
  long long block;
  int start;
  bool full;

  __device__ __forceinline__ void init(const AttnParams& p, int b, int h, int mask_row, int kv_len, int tile_n,
                                       int split) {
    idx0 = idx1 = nullptr;
    cnt0 = 0, sub = 0, tile = tile_n, kvl = kv_len;
    dense = p.kv_num_blocks == nullptr;
    int n = 0;
    if (dense) {
      block = tile_n, subs = 1;
      n = (kv_len + tile_n - 1) / tile_n;
    } else {
      block = p.kv_block, subs = p.kv_block / tile_n;
      if (mask_row >= 0 && mask_row < p.nq) {
        const long long row = mask_list_row(p, b, h, mask_row, p.nq);
        int c = p.kv_num_blocks[row];
        cnt0 = c < 0 ? 0 : (c > p.nkv ? p.nkv : c);
        idx0 = p.kv_indices + row * p.nkv;
        n = cnt0;
        if (p.full_kv_num_blocks != nullptr && p.full_kv_indices != nullptr) {
          c = p.full_kv_num_blocks[row];
          n += c < 0 ? 0 : (c > p.nkv ? p.nkv : c);
          idx1 = p.full_kv_indices + row * p.nkv;
        }
      }
    }
    const int per = (n + p.num_splits - 1) / p.num_splits;
    e = split * per;
    e1 = e + per < n ? e + per : n;
  }

  __device__ __forceinline__ bool next() {
    while (e < e1) {
      const int blk = dense ? e : (e < cnt0 ? idx0[e] : idx1[e - cnt0]);
      const long long s = (long long)blk * block + (long long)sub * tile;
      const bool ok = blk >= 0 && s < kvl;
      const bool is_full = !dense && e >= cnt0;
      if (!ok || ++sub >= subs) {
        sub = 0;
        ++e;
      }
      if (ok) {
        start = (int)s;
        full = is_full;
        return true;
      }
    }
    return false;
  }
};

// pt (paged caches only): kv rows on a page id outside [0, num_pages) are masked, as torch's
// PagedAttention masks unmapped pages; the page-table read hits L1 (the loads just read the same row).
template <class V, bool kFull, int NI>
__device__ __forceinline__ void decode_scores(float (&s)[1][NI][4], const AttnParams& p, int b, const int (&hq)[2],
                                              const int (&qp)[2], const bool (&act)[2], int kv0, int kvl,
                                              const int* pt, int lane) {
#pragma unroll
  for (int ni = 0; ni < NI; ++ni) {
    // The thread's two columns per ni are adjacent and page sizes are >= 1: read the page of each.
    bool mapped[2] = {true, true};
    if (pt != nullptr) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int kv = kv0 + ni * 8 + (lane & 3) * 2 + c;
        const int phys = kv < kvl ? __ldg(pt + decode_page_of(p, kv)) : 0;
        mapped[c] = phys >= 0 && phys < p.num_pages;
      }
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int kv = kv0 + ni * 8 + (lane & 3) * 2 + (e & 1), r = e >> 1;
      const bool in_bounds = kv < kvl && act[r] && mapped[e & 1];
      s[0][ni][e] = masked_score_log2<V, kFull>(p, s[0][ni][e], b, hq[r], qp[r], wrap_index(kv, kvl), in_bounds);
    }
  }
}

template <class V, class T, int D, int Dv, int BM>
__device__ __forceinline__ void attn_decode(const AttnParams& p) {
  static_assert(D % 16 == 0 && Dv % 16 == 0 && D <= 256 && Dv <= 256, "head dims: multiples of 16, <= 256");
  constexpr DecodeTile kT = decode_tile(BM, D, Dv);
  constexpr int BN = kT.block_n, WR = kT.warp_rows, WC = kT.warp_cols, NT = WR * WC * 32;
  constexpr int NI = BN / WC / 8, DI = Dv / 8, SQ = decode_dmax(D, Dv) + 8, SK = D + 8, SV = Dv + 8;
  constexpr int SO = decode_slab_stride(Dv);
  static_assert(WR * 16 == BM && NI % 2 == 0, "decode tile shape");
  extern __shared__ __align__(128) unsigned char smem[];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wr = warp / WC, wc = warp % WC, m0 = wr * 16, n0 = wc * (BN / WC);
  const int groups = p.Hq / p.pack_heads, G = p.Hq / p.Hkv;
  const int b = blockIdx.y / groups, h0 = (blockIdx.y % groups) * p.pack_heads, r0 = blockIdx.x * BM;
  const int split = blockIdx.z, rows = p.pack_heads * p.L;
  if (r0 >= rows) return;
  const int hk = h0 / G, bk = p.Bkv == 1 ? 0 : b;
  int kvl = p.kv_lens != nullptr ? p.kv_lens[b] : p.S;
  kvl = kvl < 0 ? 0 : (kvl > p.S ? p.S : kvl);
  int qoff = p.q_offsets != nullptr ? p.q_offsets[b] : p.q_offset;
  qoff = qoff < 0 ? 0 : (qoff > (1 << 30) - p.L ? (1 << 30) - p.L : qoff);  // the host's q_offset range

  const bool paged = p.page_table != nullptr;
  const int* pt = paged ? p.page_table + (long long)b * p.max_pages : nullptr;
  const unsigned char* gk = (const unsigned char*)p.k + 2 * ((paged ? 0ll : (long long)bk * p.k_sb) + (long long)hk * p.k_sh);
  const unsigned char* gv = (const unsigned char*)p.v + 2 * ((paged ? 0ll : (long long)bk * p.v_sb) + (long long)hk * p.v_sh);
  const unsigned sQ = smem_addr(smem), sK = sQ + decode_smem_q(BM, D, Dv), sV = sK + kDecodeStages * BN * SK * 2;
  float* s_m = reinterpret_cast<float*>(smem + decode_smem_q(BM, D, Dv) + decode_smem_kv(BM, D, Dv));
  float* s_l = s_m + WC * BM;

  auto load_kv = [&](int stage, int kv0) {
    decode_load_kv<BN, D, SK, NT>(sK + stage * BN * SK * 2, gk, p.k_sb, p.k_sl, pt, p, kv0, kvl, tid);
    decode_load_kv<BN, Dv, SV, NT>(sV + stage * BN * SV * 2, gv, p.v_sb, p.v_sl, pt, p, kv0, kvl, tid);
  };
  decode_load_q<BM, D, SQ, NT>(sQ, p, b, h0, r0, tid);
  cp_async_commit();

  // This thread's two rows (lane / 4 and lane / 4 + 8 of the warp's 16): head, logical position, and
  // the block-mask row it reads. Padding rows borrow the last real row's indices.
  int hq[2], qp[2], mrow[2];
  const int qb = p.kv_num_blocks != nullptr && p.q_block > 0 ? p.q_block : (1 << 30);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    int pr = r0 + m0 + (lane >> 2) + r * 8;
    pr = pr < rows ? pr : rows - 1;
    hq[r] = h0 + pr / p.L;
    qp[r] = qoff + pr % p.L;
    mrow[r] = qp[r] / qb;
  }
  float o[1][DI][4], m[1][2], l[1][2];
#pragma unroll
  for (int di = 0; di < DI; ++di) o[0][di][0] = o[0][di][1] = o[0][di][2] = o[0][di][3] = 0.f;
  m[0][0] = m[0][1] = neg_inf();
  l[0][0] = l[0][1] = 0.f;

  // Query rows of one tile can straddle block-mask rows (L > 1 at an offset): one pass per mask row,
  // each row active only in its own pass, so every row sees exactly its own list.
  const int pr_last = r0 + BM - 1 < rows ? r0 + BM - 1 : rows - 1;
  const int q_first = qoff + (r0 / p.L == pr_last / p.L ? r0 % p.L : 0);
  const int q_last = qoff + (r0 / p.L == pr_last / p.L ? pr_last % p.L : p.L - 1);
  const int pass0 = q_first / qb, pass1 = q_last / qb;
  int stage = 0;
  for (int pass = pass0; pass <= pass1; ++pass) {
    const bool act[2] = {mrow[0] == pass, mrow[1] == pass};
    DecodeTiles walk;
    walk.init(p, b, h0, pass, kvl, BN, split);
    bool has = walk.next();
    if (has) load_kv(stage, walk.start);
    cp_async_commit();
    while (has) {
      const int kv0 = walk.start;
      const bool full = walk.full;
      has = walk.next();
      if (has) load_kv(stage ^ 1, walk.start);
      cp_async_commit();
      cp_async_wait<1>();
      __syncthreads();
      float s[1][NI][4];
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) s[0][ni][0] = s[0][ni][1] = s[0][ni][2] = s[0][ni][3] = 0.f;
      gemm_ss<T, 1, NI, D, false, SQ, false, SK>(s, sQ, m0, sK + stage * BN * SK * 2, n0, lane);
      if (full) {
        decode_scores<V, true>(s, p, b, hq, qp, act, kv0 + n0, kvl, pt, lane);
      } else {
        decode_scores<V, false>(s, p, b, hq, qp, act, kv0 + n0, kvl, pt, lane);
      }
      softmax_step(s, m, l, o);
      unsigned a[1][NI / 2][4];
      acc_to_a<T>(a, s);
      gemm_rs<T, 1, DI, NI / 2, true, SV>(o, a, sV + stage * BN * SV * 2 + n0 * SV * 2, 0, lane);
      __syncthreads();
      stage ^= 1;
    }
  }
  cp_async_wait<0>();
  __syncthreads();

  // Epilogue: merge the warp columns (each has its own max) through fp32 slabs over the K/V ring.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = l[0][r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    l[0][r] = sum;
    if ((lane & 3) == 0) {
      s_m[wc * BM + m0 + (lane >> 2) + r * 8] = m[0][r];
      s_l[wc * BM + m0 + (lane >> 2) + r * 8] = sum;
    }
  }
  __syncthreads();
  float* slab = reinterpret_cast<float*>(smem + decode_smem_q(BM, D, Dv));
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = m0 + (lane >> 2) + r * 8;
    float mx = neg_inf();
#pragma unroll
    for (int w = 0; w < WC; ++w) mx = fmaxf(mx, s_m[w * BM + row]);
    const float mu = mx == neg_inf() ? 0.f : mx;
    const float sc = fast_exp2(m[0][r] - mu);
#pragma unroll
    for (int di = 0; di < DI; ++di) {
      float2 v2 = make_float2(o[0][di][2 * r] * sc, o[0][di][2 * r + 1] * sc);
      *reinterpret_cast<float2*>(slab + (wc * BM + row) * SO + di * 8 + (lane & 3) * 2) = v2;
    }
  }
  __syncthreads();

  const int nrows = rows - r0 < BM ? rows - r0 : BM;
  const long long R = (long long)p.B * p.Hq * p.L;
  for (int idx = tid; idx < nrows * (Dv / 4); idx += NT) {
    const int row = idx / (Dv / 4), col = (idx % (Dv / 4)) * 4;
    float mx = neg_inf();
#pragma unroll
    for (int w = 0; w < WC; ++w) mx = fmaxf(mx, s_m[w * BM + row]);
    const float mu = mx == neg_inf() ? 0.f : mx;
    float sum = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int w = 0; w < WC; ++w) {
      sum += s_l[w * BM + row] * fast_exp2(s_m[w * BM + row] - mu);
      const float4 x = *reinterpret_cast<const float4*>(slab + (w * BM + row) * SO + col);
      acc.x += x.x, acc.y += x.y, acc.z += x.z, acc.w += x.w;
    }
    const int pr = r0 + row, h = h0 + pr / p.L, i = pr % p.L;
    const long long rid = ((long long)b * p.Hq + h) * p.L + i;
    if (p.num_splits <= 1) {
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      uint2 packed;
      packed.x = Num<T>::pack(acc.x * inv, acc.y * inv);
      packed.y = Num<T>::pack(acc.z * inv, acc.w * inv);
      unsigned char* go = (unsigned char*)p.out + 2 * ((long long)b * p.out_sb + (long long)h * p.out_sh +
                                                       (long long)i * p.out_sl + col);
      *reinterpret_cast<uint2*>(go) = packed;
      if (col == 0) {
        if (p.lse != nullptr) p.lse[rid] = sum > 0.f ? (mx + log2f(sum)) * kLn2 : neg_inf();
        if (p.max_score != nullptr) p.max_score[rid] = sum > 0.f ? mx * kLn2 : neg_inf();
      }
    } else {
      const long long prow = split * R + rid;
      *reinterpret_cast<float4*>(p.part_o + prow * Dv + col) = acc;
      if (col == 0) *reinterpret_cast<float2*>(p.part_ml + prow * 2) = make_float2(mx, sum);
    }
  }
}

}  // namespace flexattn::kern
