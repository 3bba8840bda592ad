#pragma once
// Decode attention (short queries, split-KV), sm_80+ on mma.sync. One CTA per (row tile of the packed
// rows, batch x head group, kv split): the packed rows are pack_heads query heads x L query rows that
// share one kv head, so every K/V byte is read once per group. Each split walks its share of the
// block-sparse list (or of the kv tiles without a mask) through a kDecodeStages-deep cp.async ring;
// pages of a paged cache are read from the page table once per tile into a shared-memory slot that the
// loads and the score mask read. With one split the CTA writes out / lse itself;
// otherwise it writes fp32 partials that decode_combine.cuh merges.
#include "common/mask_iter.cuh"
#include "common/numeric.cuh"
#include "common/params.h"
#include "common/variant.cuh"
#include "decode/decode_bulk.cuh"
#include "decode/decode_config.h"
#include "decode/decode_tma.cuh"
#include "sm80/attn_fwd_sm80.cuh"
#include "sm80/scores_sm80.cuh"
#include "sm80/warp_gemm.cuh"
#include "sm90/ptx/cluster.cuh"

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
// The physical page of kv row pos (>= 0), or -1 at or past kvl (the page table is not read there).
__device__ __forceinline__ int decode_page_at(const int* pt, const AttnParams& p, int pos, int kvl) {
  return pos < kvl ? __ldg(pt + decode_page_of(p, pos)) : -1;
}
// Whether a page id read from the table lies in the pool (-1 and ids outside [0, num_pages) do not).
__device__ __forceinline__ bool decode_page_mapped(const AttnParams& p, int phys) { return phys >= 0 && phys < p.num_pages; }

// Paged caches, in two steps so the page-table read is off the critical path: decode_page_read is this
// thread's row's physical page (row tid % ROWS of the ROWS kv rows from kv0; -1 at or past kvl, where the page
// table is not read): one cached int32 load per row (lanes of one page coalesce), issued a tile ahead and
// not consumed until decode_page_store writes it into a shared-memory slot, with -1 for a page id outside
// [0, num_pages) too; bit r of unmapped[0, 2) (64 bits) is set for exactly the rows holding -1.
// decode_load_kv reads the slot and decode_scores the bits, instead of the page table.
template <int ROWS, int NT>
__device__ __forceinline__ int decode_page_read(const int* pt, const AttnParams& p, int kv0, int kvl, int tid) {
  static_assert(ROWS % 32 == 0 && NT % 32 == 0 && ROWS <= 64 && ROWS <= NT, "a row per thread; two words");
  return decode_page_at(pt, p, kv0 + tid % ROWS, kvl);  // threads past ROWS read row tid % ROWS too (V rows)
}
template <int ROWS, int NT>
__device__ __forceinline__ void decode_page_store(int* pages, unsigned* unmapped, int phys, const AttnParams& p,
                                                  int tid) {
  if (tid < ROWS) {  // warp-uniform: ROWS is a multiple of 32
    phys = decode_page_mapped(p, phys) ? phys : -1;
    pages[tid] = phys;
    const unsigned bad = __ballot_sync(0xffffffffu, phys < 0);
    if ((tid & 31) == 0) unmapped[tid >> 5] = bad;
  }
}

// One K or V tile of ROWS logical kv rows from kv0. pages: the tile's page slot (decode_page_store;
// null: contiguous rows from base). Rows at or past kvl, and rows on a page id outside the pool, are
// zero-filled without reading memory (decode_scores masks the latter).
template <int ROWS, int COLS, int STR, int NT>
__device__ __forceinline__ void decode_load_kv(unsigned dst, const unsigned char* base, long long page_stride,
                                               long long row_stride, const int* pages, const AttnParams& p,
                                               int kv0, int kvl, int tid) {
  constexpr int kCpr = COLS / 8, kTotal = ROWS * kCpr;
  // Unrolled by 4, not fully: a full unroll kept every chunk's address live (D = 256 spilled 8 B with the
  // page slots; m16 at D = 128 took 162-168 registers, 132-148 unrolled by 4). Not yet timed on a GPU.
#pragma unroll 4
  for (int it = 0; it < (kTotal + NT - 1) / NT; ++it) {
    const int i = tid + it * NT;
    if (kTotal % NT == 0 || i < kTotal) {
      const int r = i / kCpr, c = i % kCpr, pos = kv0 + r;
      bool ok = pos < kvl;
      long long off = 0;
      if (pages != nullptr) {
        const int phys = pages[r];  // -1 covers pos >= kvl too
        const int in = p.page_shift >= 0 ? pos & ((1 << p.page_shift) - 1) : pos % p.page_size;
        ok = phys >= 0;
        off = ok ? (long long)phys * page_stride + (long long)in * row_stride : 0;
      } else {
        off = (long long)pos * row_stride;
      }
      cp_async_16(dst + (r * STR + c * 8) * 2, ok ? base + 2 * (off + c * 8) : base, ok);
    }
  }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && FLEXATTN_DECODE_BULK
constexpr bool kDecodeBulk = true;
#else
constexpr bool kDecodeBulk = false;  // the 16-byte cp.async ring (sm_80, and the default)
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && FLEXATTN_DECODE_BULK && FLEXATTN_DECODE_WARP_RING
constexpr bool kDecodeWarpRingOn = true;  // decode_config.h: each warp its own slice of the bulk ring
#else
constexpr bool kDecodeWarpRingOn = false;
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && FLEXATTN_DECODE_BULK && FLEXATTN_DECODE_TMA
constexpr bool kDecodeTmaOn = true;  // decode_tma.cuh: the _tma entries load contiguous caches' tiles with TMA
#else
constexpr bool kDecodeTmaOn = false;
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && FLEXATTN_DECODE_CLUSTER
constexpr bool kDecodeCluster = true;  // the splits may merge in a cluster (decode_cluster_combine)
#else
constexpr bool kDecodeCluster = false;
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
constexpr int kDecodePrefetch = FLEXATTN_DECODE_PREFETCH;  // L2 prefetch, tiles ahead (0: none), either ring
#else
constexpr int kDecodePrefetch = 0;
#endif

// This thread's row of a tile on the bulk ring and the L2 prefetch: K row tid (tid < ROWS) or V row
// tid - ROWS. The K and V rows differ only in which base, strides and length they take, chosen here once
// for the copy and the prefetch (before, each helper chose them itself). The fields are computed where
// they are used, so the generated code is what it was before this helper (SASS-identical, sm_90a).
template <int ROWS, int D, int Dv>
struct DecodeKvRow {
  bool is_v;
  int r;  // the row within the tile
  __device__ __forceinline__ explicit DecodeKvRow(int tid) : is_v(tid >= ROWS), r(tid >= ROWS ? tid - ROWS : tid) {}
  __device__ __forceinline__ DecodeKvRow(bool v, int row) : is_v(v), r(row) {}  // the warp ring's rows
  __device__ __forceinline__ unsigned bytes() const { return 2u * (is_v ? Dv : D); }
  // The global address of the row of the tile from kv0, or null for a row at or past kvl or on a page id
  // outside the pool. phys: the row's page (paged caches).
  __device__ __forceinline__ const unsigned char* src(const unsigned char* gk, const unsigned char* gv,
                                                      const AttnParams& p, bool paged, int phys, int kv0,
                                                      int kvl) const {
    const int pos = kv0 + r;
    if (paged) {
      if (!decode_page_mapped(p, phys)) return nullptr;  // -1 at or past kvl
      const int in = p.page_shift >= 0 ? pos & ((1 << p.page_shift) - 1) : pos % p.page_size;
      return (is_v ? gv : gk) +
             2 * ((long long)phys * (is_v ? p.v_sb : p.k_sb) + (long long)in * (is_v ? p.v_sl : p.k_sl));
    }
    return pos < kvl ? (is_v ? gv : gk) + 2 * (long long)pos * (is_v ? p.v_sl : p.k_sl) : nullptr;
  }
};

// FLEXATTN_DECODE_PREFETCH: thread tid asks L2 for its row (DecodeKvRow) of the tile from kv0 (nothing for
// a row at or past kvl or on a page id outside the pool). phys: the row's page. One helper for both
// prefetch distances (k = 1 and k >= 2 prefetch the same rows of different tiles).
template <int ROWS, int D, int Dv>
__device__ __forceinline__ void decode_prefetch_row(const unsigned char* gk, const unsigned char* gv,
                                                    const AttnParams& p, bool paged, int phys, int kv0, int kvl,
                                                    int tid) {
  const DecodeKvRow<ROWS, D, Dv> row(tid);
  const unsigned char* src = row.src(gk, gv, p, paged, phys, kv0, kvl);
  if (src != nullptr) decode_bulk_prefetch_l2(src, row.bytes());
}

// The bulk ring (kDecodeBulk): this thread copies its row (DecodeKvRow) of the tile from kv0 with one
// cp.async.bulk completing on bar, after arriving on bar with the bytes it expects (so the stage's phase
// completes when every thread counted by bar arrived and every byte landed). phys: the row's physical page
// (decode_page_read; paged caches). A row at or past kvl or on a page id outside the pool is zeroed in
// shared memory instead (as the cp.async ring's zero-fill: V rows must not be garbage under P = 0); the
// barrier that ends the iteration (the CTA's, or the warp's on the warp ring) makes those stores visible.
template <int ROWS, int D, int Dv, int SK, int SV>
__device__ __forceinline__ void decode_bulk_row(unsigned sK, unsigned sV, unsigned bar, const unsigned char* gk,
                                                const unsigned char* gv, const AttnParams& p, bool paged, int phys,
                                                int kv0, int kvl, const DecodeKvRow<ROWS, D, Dv>& row) {
  const unsigned char* src = row.src(gk, gv, p, paged, phys, kv0, kvl);
  const unsigned bytes = row.bytes();
  const unsigned dst = row.is_v ? sV + row.r * SV * 2 : sK + row.r * SK * 2;
  decode_mbar_arrive_tx(bar, src != nullptr ? bytes : 0u);
  if (src != nullptr) {
    decode_bulk_copy(dst, src, bytes, bar, FLEXATTN_DECODE_EVICT_FIRST ? decode_l2_policy(p.kv_read_once != 0) : 0ull);
  } else {
    for (unsigned c = 0; c < bytes; c += 16) decode_zero_16(dst + c);
    decode_fence_proxy_async();  // before a later bulk copy into this row
  }
}
// The CTA-wide ring: thread tid takes K row tid (tid < ROWS) or V row tid - ROWS.
template <int ROWS, int D, int Dv, int SK, int SV, int NT>
__device__ __forceinline__ void decode_bulk_kv(unsigned sK, unsigned sV, unsigned bar, const unsigned char* gk,
                                               const unsigned char* gv, const AttnParams& p, bool paged, int phys,
                                               int kv0, int kvl, int tid) {
  static_assert(NT == 2 * ROWS, "a K or V row per thread");
  decode_bulk_row<ROWS, D, Dv, SK, SV>(sK, sV, bar, gk, gv, p, paged, phys, kv0, kvl, DecodeKvRow<ROWS, D, Dv>(tid));
}

// This split's share of one list pass: entries [e, e1) of the concatenated (partial, full) lists, each
// expanded into block / tile compute tiles below kvl. Without a block mask the list is the identity
// over the kv tiles (every tile partial, as in the main kernels).
struct DecodeTiles {
  const int* idx0;
  const int* idx1;
  bool dense;  // no block mask: entry e is kv tile e
  int cnt0, e, e1, sub, subs, tile;
  // Dense walks: tile e starts at row0 + e * tile, and rows at or past end (<= kv_len) lie past this split's last
  // tile; block-mask walks: row0 = 0, end = kv_len.
  int row0, end;
  long long block;
  int start;
  bool full;

  __device__ __forceinline__ void init(const AttnParams& p, int b, int h, int mask_row, int kv_len, int tile_n,
                                       int split) {
    idx0 = idx1 = nullptr;
    cnt0 = 0, sub = 0, tile = tile_n;
    row0 = 0, end = kv_len;
    dense = p.kv_num_blocks == nullptr;
    int n = 0;
    if (dense) {
      block = tile_n, subs = 1;
      // Not within two tiles of the int range: a tile starting off the grid there would form row positions
      // past INT_MAX (kv0 + r), which tile starts, multiples of 64, never do.
      if (FLEXATTN_DECODE_ROW_SPLIT && p.num_splits > 1 && kv_len <= 0x7fffffff - 2 * tile_n) {
        const DecodeRowRange r = decode_row_split(kv_len, p.num_splits, split);
        row0 = r.row0, end = r.end;
        e = 0, e1 = (end - row0 + tile_n - 1) / tile_n;
        return;
      }
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
    if (dense && (long long)e1 * tile_n < end) end = e1 * tile_n;
  }

  __device__ __forceinline__ bool next() {
    while (e < e1) {
      const int blk = dense ? e : (e < cnt0 ? idx0[e] : idx1[e - cnt0]);
      const long long s = row0 + (long long)blk * block + (long long)sub * tile;
      const bool ok = blk >= 0 && s < end;
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

// The unmapped-row bits a warp keeps: one word when its columns fit (no std:: under NVRTC).
template <bool kWord>
struct DecodeBits {
  using type = unsigned;
};
template <>
struct DecodeBits<false> {
  using type = unsigned long long;
};

// unmapped (paged caches; 0 otherwise): bit j set when this warp's column j (from kv0) is at or past
// kvl or on a page id outside [0, num_pages) (decode_page_store); the latter are masked, as torch's
// PagedAttention masks unmapped pages (the former are masked by kvl anyway). Columns at or past kv_end (<= kvl;
// the split's end on FLEXATTN_DECODE_ROW_SPLIT walks) are masked; kvl is what the mods' indices wrap at.
template <class V, bool kFull, int NI, class Bits>
__device__ __forceinline__ void decode_scores(float (&s)[1][NI][4], const AttnParams& p, int b, const int (&hq)[2],
                                              const int (&qp)[2], const bool (&act)[2], int kv0, int kvl,
                                              int kv_end, Bits unmapped, int lane) {
  static_assert(NI * 8 <= 8 * (int)sizeof(Bits), "one bit per column");
#pragma unroll
  for (int ni = 0; ni < NI; ++ni) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int j = ni * 8 + (lane & 3) * 2 + (e & 1), kv = kv0 + j, r = e >> 1;
      const bool in_bounds = kv < kv_end && act[r] && ((unmapped >> j) & 1u) == 0;
      s[0][ni][e] = masked_score_log2<V, kFull>(p, s[0][ni][e], b, hq[r], qp[r], wrap_index(kv, kvl), in_bounds);
    }
  }
}

// One float4 of query row i of head h: the lse-weighted merge of N (or fewer: the rest with max -inf, sum 0) splits'
// (max, sum) ml and partials x, as attn_decode_combine (decode_combine.cuh) with its guards (an empty split has max
// -inf, sum 0 and weight 0; a row no split attended gets out = 0, lse = max_score = -inf), summed in split order;
// writes out's 4 columns at col and, at col 0, lse / max_score. The cluster merge and the last-CTA merge share it.
template <class T, int N>
__device__ __forceinline__ void decode_merge_item(const AttnParams& p, const float2 (&ml)[N], const float4 (&x)[N], int b,
                                                  int h, int i, int col) {
  float g = neg_inf();
#pragma unroll
  for (int j = 0; j < N; ++j) g = fmaxf(g, ml[j].x);
  const float gu = g == neg_inf() ? 0.f : g;
  float total = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const float w = fast_exp2(ml[j].x - gu);  // exp2(-inf) = 0: a split that saw nothing (or past the count)
    total += ml[j].y * w;
    if (w != 0.f) acc.x += w * x[j].x, acc.y += w * x[j].y, acc.z += w * x[j].z, acc.w += w * x[j].w;
  }
  const float inv = total > 0.f ? 1.f / total : 0.f;
  uint2 packed;
  packed.x = Num<T>::pack(acc.x * inv, acc.y * inv);
  packed.y = Num<T>::pack(acc.z * inv, acc.w * inv);
  unsigned char* go =
      (unsigned char*)p.out + 2 * ((long long)b * p.out_sb + (long long)h * p.out_sh + (long long)i * p.out_sl + col);
  *reinterpret_cast<uint2*>(go) = packed;
  if (col == 0) {
    const long long rid = ((long long)b * p.Hq + h) * p.L + i;
    if (p.lse != nullptr) p.lse[rid] = total > 0.f ? (g + log2f(total)) * kLn2 : neg_inf();
    if (p.max_score != nullptr) p.max_score[rid] = total > 0.f ? g * kLn2 : neg_inf();
  }
}

// The cluster path (kDecodeCluster, launched with a cluster of the num_splits CTAs of one row tile; rank =
// split): every CTA has left its partial output of the tile's rows (fp32, unnormalised, relative to its row
// max) at slab (stride SO floats) and its rows' (max in log2 units, sum) at fin, in its own shared memory.
// After the cluster barrier each CTA merges a contiguous slice of the tile's nrows x Dv / 4 float4 items
// (items / n per CTA) by reading every peer's partials through distributed shared memory: the lse-weighted
// merge of attn_decode_combine (decode_combine.cuh) with its guards (an empty split has max -inf, sum 0 and
// weight 0; a row no split attended gets out = 0, lse = max_score = -inf); only the fp32 summation order
// differs (sequential over the splits here). The second barrier keeps every CTA's shared memory alive until
// all peers have read it.
template <class T, int Dv, int BM, int NT, int SO>
__device__ __forceinline__ void decode_cluster_combine(const AttnParams& p, unsigned slab, unsigned fin, int nrows,
                                                       int b, int h0, int r0, int tid) {
  sm90::cluster_arrive_release();
  sm90::cluster_wait_acquire();
  const int n = (int)sm90::cluster_nctarank(), rank = (int)sm90::cluster_ctarank();
  const int items = nrows * (Dv / 4), per = (items + n - 1) / n;
  const int i1 = (rank + 1) * per < items ? (rank + 1) * per : items;
  for (int idx = rank * per + tid; idx < i1; idx += NT) {
    const int row = idx / (Dv / 4), col = (idx % (Dv / 4)) * 4;
    // Every load first (none depends on another), then the math: one round trip per item.
    float2 ml[kDecodeClusterMax];
    float4 x[kDecodeClusterMax];
#pragma unroll
    for (int j = 0; j < kDecodeClusterMax; ++j) {
      ml[j] = make_float2(neg_inf(), 0.f);
      x[j] = make_float4(0.f, 0.f, 0.f, 0.f);
      if (j < n) {
        ml[j] = sm90::ld_shared_cluster_f32x2(sm90::mapa_shared(fin + row * 8, j));
        x[j] = sm90::ld_shared_cluster_f32x4(sm90::mapa_shared(slab + (row * SO + col) * 4, j));
      }
    }
    decode_merge_item<T>(p, ml, x, b, h0 + (r0 + row) / p.L, (r0 + row) % p.L, col);
  }
  sm90::cluster_arrive_relaxed();  // this CTA's reads of its peers are done
  sm90::cluster_wait_acquire();    // and every peer's reads of this CTA's slab: its shared memory may go
}

// The last-CTA merge (FLEXATTN_DECODE_MERGE with p.split_counters set; runtime/split_counters.h; the host sets them
// only for calls of at most kDecodeMergeMaxSplits splits): every split's CTA has written its partials; after a fence
// thread 0 bumps the row tile's counter with atomicInc wrapping at num_splits - 1, and the CTA that reads
// num_splits - 1 is the tile's last: it merges the tile's rows from every split's partials, read past L1 (__ldcg:
// other CTAs wrote them) in one round trip per float4 (every split's (max, sum) and partial loaded before any is
// used), with the combine kernel's weights and guards (decode_combine.cuh: a split that saw nothing weighs 0, a row
// no split attended gets out = 0 and lse = max = -inf), summed in split order (the combine's shuffle tree orders its
// row sum differently: not bitwise equal to it), and writes out / lse / max_score. The counter is 0 again for the
// next launch. So no combine kernel runs after this one: its launch, its wait for this grid and its tail go (8x8k:
// 4.4 us of ~85, session 17).
template <class T, int Dv, int NT>
__device__ __forceinline__ void decode_merge_last(const AttnParams& p, int nrows, int b, int h0, int r0, int tid) {
  constexpr int kMax = kDecodeMergeMaxSplits;
  __shared__ unsigned s_last;
  __threadfence();  // this thread's partials, device-wide, before the count
  __syncthreads();
  if (tid == 0) {
    const unsigned last = unsigned(p.num_splits - 1);
    s_last = atomicInc(p.split_counters + (blockIdx.y * gridDim.x + blockIdx.x), last) == last;
  }
  __syncthreads();
  if (!s_last) return;  // uniform over the CTA
  __threadfence();
  const long long R = (long long)p.B * p.Hq * p.L;
  const int ns = p.num_splits;
  for (int idx = tid; idx < nrows * (Dv / 4); idx += NT) {
    const int row = idx / (Dv / 4), col = (idx % (Dv / 4)) * 4;
    const int pr = r0 + row, h = h0 + pr / p.L, i = pr % p.L;
    const long long rid = ((long long)b * p.Hq + h) * p.L + i;
    float2 ml[kMax];
    float4 x[kMax];
#pragma unroll
    for (int s = 0; s < kMax; ++s) {
      const bool in = s < ns;
      ml[s] = in ? __ldcg(reinterpret_cast<const float2*>(p.part_ml + (s * R + rid) * 2)) : make_float2(neg_inf(), 0.f);
      x[s] = in ? __ldcg(reinterpret_cast<const float4*>(p.part_o + (s * R + rid) * Dv + col))
                : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    decode_merge_item<T>(p, ml, x, b, h, i, col);
  }
}

// kTmaTiles: the _tma entries (FLEXATTN_DECODE_TMA, decode_tma.cuh), which the host launches for contiguous caches
// only, with p.k_map / p.v_map encoded (runtime/decode_tma.h).
template <class V, class T, int D, int Dv, int BM, bool kTmaTiles = false>
__device__ __forceinline__ void attn_decode(const AttnParams& p) {
  static_assert(D % 16 == 0 && Dv % 16 == 0 && D <= 256 && Dv <= 256, "head dims: multiples of 16, <= 256");
  constexpr DecodeTile kT = decode_tile(BM, D, Dv);
  constexpr int BN = kT.block_n, WR = kT.warp_rows, WC = kT.warp_cols, NT = WR * WC * 32;
  constexpr int NI = BN / WC / 8, DI = Dv / 8, SQ = decode_dmax(D, Dv) + 8, SK = D + 8, SV = Dv + 8;
  constexpr int SO = decode_slab_stride(Dv);
  static_assert(WR * 16 == BM && NI % 2 == 0, "decode tile shape");
  // The warp ring: one warp row, 16 columns per warp (a K and a V row per lane), and no L2 prefetch (whose
  // rows follow the CTA-wide ring's thread mapping).
  constexpr bool kTma = kTmaTiles && kDecodeTmaOn && decode_tma_dims(D, Dv);
  static_assert(kTma == kTmaTiles, "a _tma entry needs FLEXATTN_DECODE_TMA, the bulk ring and head dims of 64 x n");
  constexpr bool kWarpRing = !kTma && kDecodeWarpRingOn && WR == 1 && BN / WC == 16 && kDecodePrefetch == 0;
  using KRows = typename DecodeTmaRows<kTma, PaddedRows<SK>, BN, D>::type;
  using VRows = typename DecodeTmaRows<kTma, PaddedRows<SV>, BN, Dv>::type;
  // Bytes of one ring stage of K and of V: padded rows, or the TMA's unpadded swizzled slabs.
  constexpr int KST = kTma ? decode_tma_stage_bytes(BN, D) : BN * SK * 2;
  constexpr int VST = kTma ? decode_tma_stage_bytes(BN, Dv) : BN * SV * 2;
  static_assert(!kTma || kDecodeStages * (KST + VST) + 1024 <= decode_smem_kv(BM, D, Dv),
                "the TMA ring, 1024-byte aligned, inside the padded ring's bytes");
  extern __shared__ __align__(128) unsigned char smem[];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wr = warp / WC, wc = warp % WC, m0 = wr * 16, n0 = wc * (BN / WC);
  const int groups = p.Hq / p.pack_heads, G = p.Hq / p.Hkv;
  const int b = blockIdx.y / groups, h0 = (blockIdx.y % groups) * p.pack_heads, r0 = blockIdx.x * BM;
  const int split = blockIdx.z, rows = p.pack_heads * p.L;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Lets a combine launched as a programmatic dependent (FLEXATTN_DECODE_PDL) be scheduled once every
  // CTA of this grid has started; it still waits for this grid's completion (decode_wait_primary).
  // (Not when this grid merges its splits itself: no combine follows, and a user's dependent launch would only hold
  // SM slots early.)
  if (p.num_splits > 1 && (!FLEXATTN_DECODE_MERGE || p.split_counters == nullptr))
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  if (r0 >= rows) return;
  const int hk = h0 / G, bk = p.Bkv == 1 ? 0 : b;
  int kvl = p.kv_lens != nullptr ? p.kv_lens[b] : p.S;
  kvl = kvl < 0 ? 0 : (kvl > p.S ? p.S : kvl);
  int kv_end = kvl;  // rows at or past it are not this split's: not loaded, masked (the walk's end; <= kvl)
  int qoff = p.q_offsets != nullptr ? p.q_offsets[b] : p.q_offset;
  qoff = qoff < 0 ? 0 : (qoff > (1 << 30) - p.L ? (1 << 30) - p.L : qoff);  // the host's q_offset range

  const bool paged = p.page_table != nullptr;
  const int* pt = paged ? p.page_table + (long long)b * p.max_pages : nullptr;
  const unsigned char* gk = (const unsigned char*)p.k + 2 * ((paged ? 0ll : (long long)bk * p.k_sb) + (long long)hk * p.k_sh);
  const unsigned char* gv = (const unsigned char*)p.v + 2 * ((paged ? 0ll : (long long)bk * p.v_sb) + (long long)hk * p.v_sh);
  const unsigned sQ = smem_addr(smem);
  // The 128-byte swizzle of TMA tiles is a function of the address bits 7..9: their ring starts on 1024 bytes.
  const unsigned sK = kTma ? (sQ + decode_smem_q(BM, D, Dv) + 1023u) & ~1023u : sQ + decode_smem_q(BM, D, Dv);
  const unsigned sV = sK + kDecodeStages * KST;
  float* s_m = reinterpret_cast<float*>(smem + decode_smem_q(BM, D, Dv) + decode_smem_kv(BM, D, Dv));
  float* s_l = s_m + WC * BM;
  int* s_pages = reinterpret_cast<int*>(smem + decode_smem_q(BM, D, Dv) + decode_smem_kv(BM, D, Dv) +
                                        decode_smem_ml(BM, D, Dv));  // kDecodePageSlots x BN
  unsigned* s_unmapped = reinterpret_cast<unsigned*>(s_pages + kDecodePageSlots * BN);  // kDecodePageSlots x 2
  static_assert(kDecodePageSlots == kDecodeStages, "a page slot per K/V ring stage");
  // The bulk ring's mbarriers, one per stage, or on the warp ring one per stage and warp (8-byte aligned: every
  // region above is a multiple of 8 bytes).
  const unsigned s_bars = smem_addr(s_unmapped + 2 * kDecodePageSlots);
  auto bar_of = [&](int stage) { return s_bars + 8 * (kWarpRing ? stage * WC + wc : stage); };
  if constexpr (kDecodeBulk) {
    if (tid == 0) {
      for (int i = 0; i < kDecodeStages * (kWarpRing ? WC : 1); ++i) decode_mbar_init(s_bars + 8 * i, kTma ? 1 : kWarpRing ? 32 : NT);
      decode_mbar_fence_init();
    }
    __syncthreads();
  }
  unsigned phases = 0;  // bulk ring: bit st = the parity of stage st's next phase

  // A tile's loads read its page slot (the ring stage's; paged caches), written by store_pages and made
  // visible by a barrier (B0 below).
  auto load_kv = [&](int stage, int kv0) {
    const int* pg = paged ? s_pages + stage * BN : nullptr;
    decode_load_kv<BN, D, SK, NT>(sK + stage * KST, gk, p.k_sb, p.k_sl, pg, p, kv0, kv_end, tid);
    decode_load_kv<BN, Dv, SV, NT>(sV + stage * VST, gv, p.v_sb, p.v_sl, pg, p, kv0, kv_end, tid);
  };
  // Issues tile kv0 into a stage. cp.async ring: the stage's page slot must be visible (B0); bulk ring:
  // phys is this thread's row's page (the slot is only read by the scores).
  auto issue_kv = [&](int stage, int kv0, int phys) {
    if constexpr (kTma) {
      if (tid == 0)
        decode_tma_issue<BN, decode_tma_box_rows(D, Dv, FLEXATTN_DECODE_TMA_BOX), D, Dv>(sK + stage * KST, sV + stage * VST,
                                                                                    bar_of(stage), p, kv0, kv_end, hk, bk);
    } else if constexpr (kWarpRing) {  // lane l: K row n0 + l (l < 16) or V row n0 + l - 16
      decode_bulk_row<BN, D, Dv, SK, SV>(sK + stage * KST, sV + stage * VST, bar_of(stage), gk, gv, p,
                                         paged, phys, kv0, kv_end, DecodeKvRow<BN, D, Dv>(lane >= 16, n0 + (lane & 15)));
    } else if constexpr (kDecodeBulk) {
      decode_bulk_kv<BN, D, Dv, SK, SV, NT>(sK + stage * KST, sV + stage * VST, s_bars + 8 * stage, gk,
                                            gv, p, paged, phys, kv0, kv_end, tid);
    } else {
      load_kv(stage, kv0);
    }
  };
  // The warp ring reads its lanes' rows' pages (n0 + lane % 16) and keeps the unmapped bits of its 16 columns in
  // a register (unmapped_of) instead of the page slots.
  auto read_page = [&](int kv0) {
    if constexpr (kWarpRing) {
      return paged ? decode_page_at(pt, p, kv0 + n0 + (lane & 15), kv_end) : -1;
    } else {
      return paged ? decode_page_read<BN, NT>(pt, p, kv0, kv_end, tid) : -1;
    }
  };
  auto store_pages = [&](int slot, int phys) {
    if (!kWarpRing && paged) decode_page_store<BN, NT>(s_pages + slot * BN, s_unmapped + slot * 2, phys, p, tid);
  };
  auto unmapped_of = [&](int phys) -> unsigned {  // warp-uniform: every lane calls it (the walk is uniform)
    return kWarpRing && paged ? __ballot_sync(0xffffffffu, !decode_page_mapped(p, phys)) & 0xffffu : 0u;
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
  // The pipeline, per pass: tiles t_0, t_1, ... of the walk through a ring of S = kDecodeStages stages
  // (FLEXATTN_DECODE_STAGES). The prologue issues t_0 .. t_{S-2}; iteration i issues t_{i+S-1} into the
  // stage t_{i-1} used, waits for t_i (S - 1 newer groups may stay in flight) and computes it. Every
  // iteration commits one group, empty or not, so the wait count is constant. The tiles in flight
  // (start, full) ride in a register queue q[0 .. S-1], oldest first. The walk runs one tile ahead of the
  // issue (nxt): iteration i steps it to t_{i+S} and reads that tile's page ids into a register after
  // t_{i+S-1}'s loads are issued, so the list and page-table reads overlap the wait for t_i instead of
  // stalling the next issue. Barriers of iteration i: B0 (paged only, after the page slot of t_{i+S-1} is
  // written), B1 (after the cp.async wait for t_i), B2 (end).
  //
  // Page-slot invariant (paged caches; slot = ring stage):
  //  - the slot of t_{i+S-1} is written in iteration i after B2(i - 1) and before B0(i) (prologue tiles:
  //    before the prologue's B0);
  //  - it is read by t_{i+S-1}'s load issue (after B0(i)) and by its scores (iteration i + S - 1, between
  //    B1 and B2), so every write is visible before its first read;
  //  - its previous content (t_{i-1}) was last read by t_{i-1}'s scores in iteration i - 1, before
  //    B2(i - 1), so no warp still reads it when it is overwritten;
  //  - a pass starts after the previous pass's last B2 (or with no tile read), so its prologue may write
  //    any slot; the slots live past the epilogue's row max / sum, never aliased.
  // The K/V ring is the same: stage of t_{i+S-1} is written by its loads after B0(i) / B2(i - 1), which
  // end t_{i-1}'s reads of it, and read between B1(i + S - 1) and B2(i + S - 1).
  constexpr int S = kDecodeStages;
  auto next_stage = [](int st) { return st + 1 == S ? 0 : st + 1; };
  int stage = 0;  // ring stage of q[0]
  for (int pass = pass0; pass <= pass1; ++pass) {
    const bool act[2] = {mrow[0] == pass, mrow[1] == pass};
    DecodeTiles walk;
    walk.init(p, b, h0, pass, kvl, BN, split);
    kv_end = walk.end;
    int q_kv0[S];
    bool q_full[S];
    unsigned q_bad[S];  // the warp ring's unmapped bits of each tile in flight
#pragma unroll
    for (int j = 0; j < S; ++j) q_kv0[j] = -1, q_full[j] = false, q_bad[j] = 0;
    // Prologue: S - 1 tiles, one page-slot barrier for all of them.
    int ld = stage;
#pragma unroll
    for (int j = 0; j < S - 1; ++j) {
      if (walk.next()) {  // false for good once the walk ends (e >= e1)
        q_kv0[j] = walk.start, q_full[j] = walk.full;
        const int phys = read_page(walk.start);
        store_pages(ld, phys);
        q_bad[j] = unmapped_of(phys);
        if constexpr (kDecodeBulk) issue_kv(ld, walk.start, phys);
      }
      ld = next_stage(ld);
    }
    if constexpr (kDecodeBulk) {
      cp_async_wait<0>();  // Q (its cp.async group)
      __syncthreads();     // Q, and the prologue's page slots, visible to every warp
    } else {
      if (paged && q_kv0[0] >= 0) __syncthreads();  // B0 (uniform: the walk is)
      ld = stage;
#pragma unroll
      for (int j = 0; j < S - 1; ++j) {
        if (q_kv0[j] >= 0) load_kv(ld, q_kv0[j]);
        cp_async_commit();
        ld = next_stage(ld);
      }
    }
    ld = stage;
#pragma unroll
    for (int j = 0; j < S - 1; ++j) ld = next_stage(ld);
    // ld: the stage t_{i-1} used (the one after q[S-2]'s). The walk one tile ahead: nxt.
    int nxt_kv0 = q_kv0[S - 2] >= 0 && walk.next() ? walk.start : -1, nxt_phys = -1;
    bool nxt_full = walk.full;
    if (nxt_kv0 >= 0) nxt_phys = read_page(nxt_kv0);
    int pf_kv0 = -1, pf_phys = -1;  // FLEXATTN_DECODE_PREFETCH >= 2: the tile to prefetch next iteration
    (void)pf_kv0, (void)pf_phys;
    while (q_kv0[0] >= 0) {
      if (nxt_kv0 >= 0) {
        q_kv0[S - 1] = nxt_kv0, q_full[S - 1] = nxt_full;
        store_pages(ld, nxt_phys);
        q_bad[S - 1] = unmapped_of(nxt_phys);
        if (paged && !kDecodeBulk) __syncthreads();  // B0
        issue_kv(ld, nxt_kv0, nxt_phys);
      }
      if constexpr (!kDecodeBulk) cp_async_commit();
      if (nxt_kv0 >= 0) {
        nxt_kv0 = walk.next() ? walk.start : -1;
        nxt_full = walk.full;
        if (nxt_kv0 >= 0) nxt_phys = read_page(nxt_kv0);  // consumed next iteration
      }
      if constexpr (kDecodeBulk) {
        // Every thread waits for the stage's bytes itself: no B1 (the page slot of t_i was written
        // before B2 of its issuing iteration, or before the prologue's barrier).
        decode_mbar_wait(bar_of(stage), (phases >> stage) & 1u);
        phases ^= 1u << stage;
      } else {
        cp_async_wait<S - 1>();
        __syncthreads();  // B1
      }
      static_assert(kDecodePrefetch == 0 || NT == 2 * BN, "a K or V row per thread");
      if constexpr (kDecodePrefetch == 1) {
        // t_{i+S} into L2 (its page id has arrived during the wait); copied into the ring next iteration.
        if (nxt_kv0 >= 0) decode_prefetch_row<BN, D, Dv>(gk, gv, p, paged, nxt_phys, nxt_kv0, kv_end, tid);
      } else if constexpr (kDecodePrefetch > 1) {
        // Walks without a block mask only (their tiles are consecutive): the tile kDecodePrefetch - 1
        // past nxt, chosen last iteration (its page id has arrived), then the next one's page id.
        if (pf_kv0 >= 0) decode_prefetch_row<BN, D, Dv>(gk, gv, p, paged, pf_phys, pf_kv0, kv_end, tid);
        pf_kv0 = -1;
        if (walk.dense && nxt_kv0 >= 0) {
          const long long f = (long long)nxt_kv0 + (kDecodePrefetch - 1) * BN;  // may pass INT_MAX near the end
          if (f < kv_end) pf_kv0 = (int)f, pf_phys = read_page((int)f);  // (kv_end: the split's last tile's end)
        }
      }
      const int kv0 = q_kv0[0];
      const bool full = q_full[0];
      if constexpr (kTma) {  // warp-uniform; at most once per pass
        if (kv0 + BN > kv_end) decode_tma_zero_tail<BN, Dv>(sV + stage * VST, n0, BN / WC, kv_end - kv0, lane);
      }
      float s[1][NI][4];
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) s[0][ni][0] = s[0][ni][1] = s[0][ni][2] = s[0][ni][3] = 0.f;
      gemm_ss<T, 1, NI, D, false, SQ, false, SK, KRows>(s, sQ, m0, sK + stage * KST, n0, lane);
      // This warp's columns' unmapped bits: one word when they fit (n0 is a multiple of BN / WC).
      using Bits = typename DecodeBits<(BN / WC <= 32)>::type;
      Bits bad = 0;
      if (kWarpRing) {
        bad = q_bad[0];
      } else if (paged) {
        if constexpr (BN / WC <= 32) {
          bad = s_unmapped[stage * 2 + (n0 >> 5)] >> (n0 & 31);
        } else {
          bad = *reinterpret_cast<const unsigned long long*>(s_unmapped + stage * 2) >> n0;
        }
      }
      if (full) {
        decode_scores<V, true>(s, p, b, hq, qp, act, kv0 + n0, kvl, kv_end, bad, lane);
      } else {
        decode_scores<V, false>(s, p, b, hq, qp, act, kv0 + n0, kvl, kv_end, bad, lane);
      }
      softmax_step(s, m, l, o);
      unsigned a[1][NI / 2][4];
      acc_to_a<T>(a, s);
      gemm_rs<T, 1, DI, NI / 2, true, SV, VRows>(o, a, sV + stage * VST + VRows::addr(0, n0, 0), 0, lane);
      if constexpr (kWarpRing) {
        __syncwarp();  // B2 of the warp ring: only this warp reads and refills its slice of the stage
      } else {
        __syncthreads();  // B2
      }
      stage = next_stage(stage);
      ld = next_stage(ld);
#pragma unroll
      for (int j = 0; j + 1 < S; ++j) q_kv0[j] = q_kv0[j + 1], q_full[j] = q_full[j + 1], q_bad[j] = q_bad[j + 1];
      q_kv0[S - 1] = -1;
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
  // The cluster path (decode_cluster_combine): this launch put the splits of the tile in one cluster.
  // Each thread then writes its merged float4 back over slab 0 (it alone read that element, above) and
  // the row's (max, sum) after the slabs (fin), instead of the workspace.
  static_assert(4 * WC * BM * SO + 8 * BM <= decode_smem_kv(BM, D, Dv), "fin after the slabs, inside the ring");
  bool in_cluster = false;
  if constexpr (kDecodeCluster) in_cluster = p.num_splits > 1 && sm90::cluster_nctarank() > 1;
  float2* fin = reinterpret_cast<float2*>(slab + WC * BM * SO);
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
    } else if (kDecodeCluster && in_cluster) {
      *reinterpret_cast<float4*>(slab + row * SO + col) = acc;
      if (col == 0) fin[row] = make_float2(mx, sum);
    } else {
      const long long prow = split * R + rid;
      *reinterpret_cast<float4*>(p.part_o + prow * Dv + col) = acc;
      if (col == 0) *reinterpret_cast<float2*>(p.part_ml + prow * 2) = make_float2(mx, sum);
    }
  }
  if constexpr (kDecodeCluster) {
    // Uniform over the cluster: its CTAs share the row tile and num_splits.
    if (in_cluster) decode_cluster_combine<T, Dv, BM, NT, SO>(p, smem_addr(slab), smem_addr(fin), nrows, b, h0, r0, tid);
  }
  if constexpr (FLEXATTN_DECODE_MERGE) {
    if (p.num_splits > 1 && p.split_counters != nullptr && !in_cluster)
      decode_merge_last<T, Dv, NT>(p, nrows, b, h0, r0, tid);
  }
}

}  // namespace flexattn::kern
