#pragma once
// Consumer warpgroup of the sm90 backward: owns 64 kv rows of the CTA's tile and their fp32 dK / dV
// accumulators; per query tile (from the producer's ring):
//   1. S^T = K_w Q^T and dP^T = V_w dO^T (one commit group), wait;
//   2. per entry, on the accumulator registers, the sm80 family's backward_entry (the oracle's
//      definition: scale -> score_mod -> bounds -> mask_mod on partial tiles, P = exp2(s' - lse2),
//      dS = score_grad(P (dP - delta)), buffer_grad once per unmasked entry);
//   3. P^T rounded into the RS A operand, dS^T rounded into this warpgroup's shared dS^T tile;
//   4. dV += P^T dO and dK += dS^T Q, wait, release the stage; then dQ = dS K_w, wait, and add dQ into
//      dq_accum (red.global.add.v2.f32; with kDqBulk, FLEXATTN_SM90_BWD_DQ_BULK: into the shared dQ tile,
//      summed over both warpgroups there and pushed by the producer warpgroup's writer warp,
//      dq_to_smem below). The dS^T tile is single-buffered: a barrier before each write
//      keeps a fast warp from overwriting it while another warp's dQ still reads it.
// The two warpgroups share nothing but the read-only stages, so they drift freely and one's
// element-wise step overlaps the other's GEMMs. Accumulator layout: ptx/wgmma.cuh (thread (warp w,
// lane g*4+t) holds rows 16w+g, +8 and, per 8-column atom i, columns 8i+2t, +1).
#include "common/numeric.cuh"
#include "common/params.h"
#include "common/variant.cuh"
#include "sm80/scores_sm80.cuh"
#include "sm90/bwd_buffer_grad_sm90.cuh"
#include "sm90/bwd_gemm_sm90.cuh"
#include "sm90/bwd_dq_order_sm90.cuh"
#include "sm90/bwd_layout_sm90.cuh"
#include "sm90/bwd_rel_gather_sm90.cuh"
#include "sm90/bwd_tile_kind_sm90.cuh"
#include "sm90/ptx/fence.cuh"
#include "sm90/ptx/mbarrier.cuh"
#include "sm90/ptx/smem.cuh"
#include "sm90/ptx/tma.cuh"
#include "sm90/ptx/wgmma.cuh"
#include "sm90/rel_affine_sm90.cuh"

// FLEXATTN_SM90_BWD_TMA_STORE (a #define the host puts into the generated source; runtime/sm90_backward.cc): the
// TMA-store epilogue (store_dk_dv_tma) is compiled in and taken at launches with p.dkv_tma; 0: only the per-pair
// stores (the kernels that existed before it).
#ifndef FLEXATTN_SM90_BWD_TMA_STORE
#define FLEXATTN_SM90_BWD_TMA_STORE 0
#endif

namespace flexattn::kern::sm90 {

__device__ __forceinline__ void red_add_v2_f32(float* addr, float x, float y) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(addr), "f"(x), "f"(y) : "memory");
}

__device__ __forceinline__ void st_global_u32(void* addr, unsigned v) {
  asm volatile("st.global.b32 [%0], %1;" ::"l"(addr), "r"(v) : "memory");
}

// P for one entry of a variant without score_mod (the split schedule); 0 where masked or out of
// bounds. kInB: the tile lies inside [0, L) x [0, S), so no bounds test and no index wrapping
// (wrap_index is the identity there); kFull: no mask_mod.
// mask_on: as backward_entry's (edge tiles only; false: a full edge tile).
template <class V, bool kFull, bool kInB>
__device__ __forceinline__ float bwd_p_entry(const AttnParams& p, float raw, float scale_log2, float lse2, int b, int h,
                                            int q, int kv, bool mask_on = true) {
  const float pv = fast_exp2(fmaf(raw, scale_log2, -lse2));
  bool keep = kInB || (q < p.L && kv < p.S);
  if constexpr (!kFull && V::kHasMaskMod) {
    const int qw = (kInB ? q : wrap_index(q, p.L)) + p.q_offset, kvw = (kInB ? kv : wrap_index(kv, p.S)) + p.kv_offset;
    keep = keep && ((!kInB && !mask_on) || V::mask_mod(p.mod, b, h, qw, kvw));
  }
  if constexpr (kInB && (kFull || !V::kHasMaskMod)) {
    return pv;
  } else {
    return keep ? pv : 0.f;
  }
}

// P and dS for one entry (the first kernel; the v2's combined schedule): backward_entry (sm80/scores_sm80.cuh,
// with mask_on) on edge tiles; on interior tiles (kInB: q < L, kv < S, so wrap_index is the identity and
// in_bounds is true) the same definition without the bounds tests and the wrapping. Without a score_mod an
// interior entry is one FFMA (scale folded into scale_log2 = scale * log2(e), as the forward's
// masked_score_log2 does), the exp2, FADD, FMUL, plus the mask on partial tiles.
// kGivenU: score_mod(s) evaluated by the caller as `u` (rel_affine_sm90.cuh).
template <class V, bool kFull, bool kInB, bool kGivenU = false>
__device__ __forceinline__ void bwd_entry(const AttnParams& p, float raw, float dp, float scale_log2, float lse2,
                                          float delta, int b, int h, int q, int kv, float& p_out, float& ds_out,
                                          float u = 0.f, bool mask_on = true) {
  if constexpr (!kInB) {
    backward_entry<V, kFull, false, false, kGivenU>(p, raw, dp, lse2, delta, b, h, q, kv, true, p_out, ds_out, u,
                                                    mask_on);
  } else if constexpr (!V::kHasScoreMod && !V::kHasBufferGrad) {
    const float pv = bwd_p_entry<V, kFull, true>(p, raw, scale_log2, lse2, b, h, q, kv);
    p_out = pv;
    ds_out = pv * (dp - delta);  // 0 where masked: dp - delta is finite
  } else {
    const int qw = q + p.q_offset, kvw = kv + p.kv_offset;
    const float s = raw * p.scale;
    float sm = s;
    if constexpr (kGivenU) sm = u;
    else if constexpr (V::kHasScoreMod) sm = V::score_mod(p.mod, s, b, h, qw, kvw);
    bool keep = true;
    if constexpr (!kFull && V::kHasMaskMod) keep = V::mask_mod(p.mod, b, h, qw, kvw);
    const float pv = keep ? fast_exp2(sm * kLog2e - lse2) : 0.f;
    const float g = keep ? pv * (dp - delta) : 0.f;
    float ds = g;
    if constexpr (V::kHasScoreMod) ds = keep ? V::score_grad(p.mod, s, b, h, qw, kvw, g) : 0.f;
    if constexpr (V::kHasBufferGrad) {
      if (keep) V::buffer_grad(p.mod, s, b, h, qw, kvw, g);
    }
    p_out = pv;
    ds_out = ds;
  }
}

// Step 2 on one 64 x 64 tile (both kernels; the v2's combined schedule), or on the wide kernel's 64 x 32 half
// (R = 16; q0, s_lse and s_delta then point at its first column): st (raw S^T) becomes P^T, dpt (dP^T)
// becomes dS^T, both fp32. kInB: the tile lies inside [0, L) x [0, S) (no bounds test, no index wrapping);
// mask_on: as backward_entry's (false: a full edge tile). scale_log2 = scale * log2(e).
template <class V, bool kFull, bool kInB, int R>
__device__ __forceinline__ void bwd_tile_scores(float (&st)[R], float (&dpt)[R], const AttnParams& p,
                                                float scale_log2, unsigned s_lse, unsigned s_delta, int b, int h,
                                                int q0, int kv_row, int t, bool mask_on = true) {
  constexpr bool kAffine = bwd_rel_affine<V>(), kGather = bwd_rel_gather<V>();
  const BwdAffine aff = BwdAffine::of<V>(p, b, h, q0, kv_row, t);
  const BwdRelGather gat = BwdRelGather::of<V, R>(p, b, h, q0, kv_row, t);
  float g_prev[2] = {0.f, 0.f}, g_cur[2] = {0.f, 0.f};  // kGather: row values at j = i - 1 and i
  if constexpr (kGather) gat.load<V>(g_prev, -1);
#pragma unroll
  for (int i = 0; i < R / 4; ++i) {
    if constexpr (kGather) {
      if (i > 0) g_prev[0] = g_cur[0], g_prev[1] = g_cur[1];
      gat.load<V>(g_cur, i);
    }
    float lse2[2], del[2];
    ld_shared_v2_f32(s_lse + 4 * (8 * i + 2 * t), lse2[0], lse2[1]);
    ld_shared_v2_f32(s_delta + 4 * (8 * i + 2 * t), del[0], del[1]);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int kv = kv_row + 8 * (e >> 1), q = q0 + 8 * i + 2 * t + (e & 1);
      const float u = kAffine   ? aff.u(st[4 * i + e], p.scale, i, e)
                      : kGather ? fmaf(st[4 * i + e], p.scale, (e >> 1) ? g_prev[e & 1] : g_cur[e & 1])
                                : 0.f;
      bwd_entry<V, kFull, kInB, kAffine || kGather>(p, st[4 * i + e], dpt[4 * i + e], scale_log2, lse2[e & 1],
                                                    del[e & 1], b, h, q, kv, st[4 * i + e], dpt[4 * i + e], u, mask_on);
    }
  }
}

// bwd_tile_scores as a dispatch_tile_kind step.
FLEXATTN_TILE_KIND_STEP(TileScoresStep, bwd_tile_scores)

// Step 3: P^T packed in A-operand order (k-step ks uses pa[4ks .. 4ks+3]) and dS^T stored into the
// swizzled [64 kv][64 q] tile: the pair (row, 8i+2t) lands in 16-byte chunk i ^ (row % 8) of the row,
// so the 8 rows of a warp hit 8 distinct chunks (no bank conflicts).
template <class T>
__device__ __forceinline__ void round_p_ds(unsigned (&pa)[16], const float (&pt)[32], const float (&dst)[32],
                                           unsigned ds_tile, int warp, int g, int t) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      pa[2 * i + r] = Num<T>::pack(pt[4 * i + 2 * r], pt[4 * i + 2 * r + 1]);
      const int row = 16 * warp + g + 8 * r;
      st_shared_u32(ds_tile + row * 128 + ((i ^ (row & 7)) << 4) + 4 * t,
                    Num<T>::pack(dst[4 * i + 2 * r], dst[4 * i + 2 * r + 1]));
    }
  }
}

// dQ partial of this warpgroup into dq_accum rows < L (fp32, unscaled: dq_convert applies scale).
template <int D>
__device__ __forceinline__ void add_dq(const AttnParams& p, const float (&dq)[D / 2], int b, int h, int q0, int warp,
                                       int g, int t) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int q = q0 + 16 * warp + g + 8 * r;
    if (q < p.L) {
      float* row = p.dq_accum + (((long long)b * p.Hq + h) * p.L + q) * D + 2 * t;
#pragma unroll
      for (int i = 0; i < D / 8; ++i) red_add_v2_f32(row + 8 * i, dq[4 * i + 2 * r], dq[4 * i + 2 * r + 1]);
    }
  }
}

// Where a thread's dQ pairs lie in a dQ buffer of the bulk path (both consumers): the pair (row
// 16 warp + g + 8 r, columns 64 wg + 8 i + 2 t, + 1) at at(base(buf, wg, ...), r, i, ...), base holding
// the part that does not depend on (r, i), computed once per tile. The two layouts differ only here:
//   padded rows (kTma false): rows dq_row = 4 D + 32 bytes apart, so the 16 lanes of a half-warp (rows
//     g = 0..3, columns 2t) hit 32 distinct banks;
//   v3 (kTma, FLEXATTN_SM90_BWD_V3): D / 32 slabs of [64 rows][32 fp32] with the 128B swizzle
//     (tile_config_sm90_bwd.h; what the writer's TMA tensor reductions read): the pair lies in slab
//     2 wg + i / 4, 16-byte chunk (2 (i % 4) + t / 2) ^ (row % 8), byte 8 (t % 2), and row % 8 == g for
//     both r. An 8-byte access is served per half-warp (rows g = 0..3 or 4..7), and rows g and g ^ 1 put
//     column block i on the same chunk pair: stored in step order, every half-warp took 2 wavefronts, not 1
//     (ncu, H100, session 29: the dQ stores' and loads' shared wavefronts were half excessive, 100 M of the D = 64
//     backward's 610 M). So the lanes of odd g take block i ^ 2 at step i (lane_chunk_xor): the half-warp's
//     four rows then use the chunk pairs a, a ^ 2, a ^ 1, a ^ 3 (a = i % 4), all 32 banks. Same layout, another
//     order per lane (one select per value), with FLEXATTN_SM90_BWD_DQ_SWAP (the default since session 29: backward
//     1.5-2.6 % faster on an H100).
// wg: the index of the warpgroup's first 64-column block (the v2: its half, the wide kernel: 2 x its
// 128-column half); 0 for the first consumer (each of its warpgroups holds all D columns). The sums keep the operand order of the per-layout code they replace.
template <class C>
struct DqSlots {
  // Whether lanes of odd g take column block i ^ 2 at step i, and the chunk XOR that places it (g ^ 4 for them).
#if defined(FLEXATTN_SM90_BWD_DQ_SWAP)
  static constexpr bool kSwap = C::kTma;
#else
  static constexpr bool kSwap = false;
#endif
  static __device__ __forceinline__ bool swapped(int g) { return sm90_dq_v3_step_block(0, g, kSwap) != 0; }
  static __device__ __forceinline__ int lane_chunk_xor(int g) { return sm90_dq_v3_chunk_xor(g, kSwap); }
  // This step's pair of a thread's dQ registers (R of them, 4 per column block): block i, or i ^ 2 if swapped.
  template <int R>
  static __device__ __forceinline__ void pair(const float (&dq)[R], bool sw, int r, int i, float& x, float& y) {
    if constexpr (kSwap) {
      static_assert(R / 4 % 4 == 0, "the swapped order pairs blocks within groups of four");
      const int k = sm90_dq_v3_step_block(i, 1, true);  // the block an odd row takes at step i
      x = sw ? dq[4 * k + 2 * r] : dq[4 * i + 2 * r];
      y = sw ? dq[4 * k + 2 * r + 1] : dq[4 * i + 2 * r + 1];
    } else {
      x = dq[4 * i + 2 * r], y = dq[4 * i + 2 * r + 1];
    }
  }
  static __device__ __forceinline__ unsigned base(unsigned buf, int wg, int warp, int g, int t) {
    if constexpr (C::kTma) return buf + 2 * wg * (64 * 128) + (16 * warp + g) * 128 + 8 * (t & 1);
    else return buf + (16 * warp + g) * C::kSmem.dq_row + 4 * 64 * wg + 8 * t;
  }
  // gx: lane_chunk_xor(g).
  static __device__ __forceinline__ unsigned at(unsigned base, int r, int i, int gx, int t) {
    if constexpr (C::kTma) return base + (i >> 2) * (64 * 128) + 8 * r * 128 + (sm90_dq_v3_chunk(i, t, gx) << 4);
    else return base + 8 * r * C::kSmem.dq_row + 32 * i;
  }
};

// Bulk dQ path: this warpgroup's dQ partial of query tile (q0, bh = b * Hq + h) into dQ buffer j
// (layout: DqSlots). Warpgroup 0 waits until the writer warp has finished reading the buffer's previous
// tile (dq_empty), stores its partial and signals warpgroup 1 (named barrier 7 + j, bar.arrive:
// warpgroup 0 goes on at once); warpgroup 1 waits for that, adds its partial element by element (thread
// tid of either warpgroup holds the same (row, column) entries, so each thread only re-reads what its
// twin wrote), thread 0 fills the info slot, and every thread fences its writes to the async proxy
// before arriving on dq_full(j). Rows >= L are stored too (they are zero: P = 0 there) but never reduced.
template <int D, int Dv, bool kB, bool kT>
__device__ __forceinline__ void dq_to_smem(const BwdCfg<D, Dv, kB, false, kT>& c, int j, unsigned phase, int wg,
                                           const float (&dq)[D / 2], int q0, int bh, int tid, int warp, int g,
                                           int t) {
  using Slots = DqSlots<BwdCfg<D, Dv, kB, false, kT>>;
  const unsigned buf = Slots::base(c.dq_buf(j), 0, warp, g, t);
  const bool sw = Slots::swapped(g);
  const int gx = Slots::lane_chunk_xor(g);
  if (wg == 0) {
    mbar_wait(c.dq_empty(j), phase ^ 1u);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int i = 0; i < D / 8; ++i) {
        float x, y;
        Slots::pair(dq, sw, r, i, x, y);
        st_shared_v2_f32(Slots::at(buf, r, i, gx, t), x, y);
      }
    }
    named_bar_arrive(kBarDqStored0 + j, 256);
  } else {
    named_bar_sync(kBarDqStored0 + j, 256);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int i = 0; i < D / 8; ++i) {
        const unsigned a = Slots::at(buf, r, i, gx, t);
        float x, y, u, v;
        ld_shared_v2_f32(a, x, y);
        Slots::pair(dq, sw, r, i, u, v);
        st_shared_v2_f32(a, x + u, y + v);
      }
    }
    if (tid == 0) {
      st_shared_s32(c.dq_info(j), q0);
      st_shared_s32(c.dq_info(j) + 4, bh);
    }
    fence_proxy_async_smem();
    mbar_arrive(c.dq_full(j));
  }
}

// Bulk dQ path, no more tiles: warpgroup 1 puts the end marker into the next dQ buffer's info slot once
// the writer has finished with that buffer's previous tile, and releases it through dq_full.
template <int D, int Dv, bool kB, bool kT>
__device__ __forceinline__ void dq_end_marker(const BwdCfg<D, Dv, kB, false, kT>& c, int j, unsigned phase, int tid) {
  mbar_wait(c.dq_empty(j), phase ^ 1u);
  if (tid == 0) st_shared_s32(c.dq_info(j), -1);
  mbar_arrive(c.dq_full(j));
}

// The dQ ring of the consumers that fill a buffer together (v2, wide): tile n goes to buffer n % DQB in phase
// (n / DQB) & 1. One counter, and with one buffer the constant buffer 0 (v2 with the per-row tiles, the wide kernel).
template <int DQB>
struct DqRing {
  static_assert(DQB == 1 || DQB == 2, "one or two dQ buffers");
  unsigned n = 0u;
  __device__ __forceinline__ int stage(unsigned k = 0u) const { return DQB == 1 ? 0 : int((n + k) & 1u); }
  __device__ __forceinline__ unsigned phase(unsigned k = 0u) const { return DQB == 1 ? (n + k) & 1u : ((n + k) >> 1) & 1u; }
};

// One dQ buffer (j, of the DqRing) filled by both consumer warpgroups (the v2: 64 columns each; the wide kernel: 128):
// this warpgroup's columns of the tile's dQ (R accumulators per thread: 64-column block wg * R / 32 of DqSlots, padded
// rows or with kTma the v3 swizzled slabs) of query tile (q0, bh), once the writer warp has finished reading
// the buffer's previous tile (dq_empty); warpgroup 0's thread 0 fills the info slot; every thread fences its stores to
// the async proxy and arrives on dq_full (256 arrivals).
template <class Cfg, int R>
__device__ __forceinline__ void dq_cols_to_smem(const Cfg& c, int j, unsigned phase, int wg, const float (&dq)[R],
                                                int q0, int bh, int tid, int warp, int g, int t) {
  using Slots = DqSlots<Cfg>;
  mbar_wait(c.dq_empty(j), phase ^ 1u);
  const unsigned buf = Slots::base(c.dq_buf(j), wg * (R / 32), warp, g, t);
  const bool sw = Slots::swapped(g);
  const int gx = Slots::lane_chunk_xor(g);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
#pragma unroll
    for (int i = 0; i < R / 4; ++i) {
      float x, y;
      Slots::pair(dq, sw, r, i, x, y);
      st_shared_v2_f32(Slots::at(buf, r, i, gx, t), x, y);
    }
  }
  if (wg == 0 && tid == 0) {
    st_shared_s32(c.dq_info(j), q0);
    st_shared_s32(c.dq_info(j) + 4, bh);
  }
  fence_proxy_async_smem();
  mbar_arrive(c.dq_full(j));
}

// The same buffer, no more tiles: the end marker (-1) in the info slot once the writer is done with it.
template <class Cfg>
__device__ __forceinline__ void dq_end_marker_one_buffer(const Cfg& c, int j, unsigned phase, int wg, int tid) {
  mbar_wait(c.dq_empty(j), phase ^ 1u);
  if (wg == 0 && tid == 0) st_shared_s32(c.dq_info(j), -1);
  mbar_arrive(c.dq_full(j));
}

// dK (scaled) or dV rounded to T, rows < S, straight from the accumulator (once per CTA).
template <class T, int C>
__device__ __forceinline__ void store_rows(void* base, long long row_stride, const float (&acc)[C / 2], float scale,
                                           int row0, int S, int t) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row0 + 8 * r < S) {
      unsigned char* row = (unsigned char*)base + 2 * ((long long)(row0 + 8 * r) * row_stride + 2 * t);
#pragma unroll
      for (int i = 0; i < C / 8; ++i)
        st_global_u32(row + 16 * i, Num<T>::pack(acc[4 * i + 2 * r] * scale, acc[4 * i + 2 * r + 1] * scale));
    }
  }
}

// The CTA's epilogue by per-pair stores (every consumer kernel): dK = scale * dS^T Q and dV as accumulated, rows < S;
// D / Dv: the columns this thread holds, from column col0 on (the wide kernel's 128-column halves; 0 elsewhere).
template <class T, int D, int Dv>
__device__ __forceinline__ void store_dk_dv(const AttnParams& p, const float (&dk)[D / 2], const float (&dv)[Dv / 2],
                                            int bz, int hk, int kv_row, int t, int col0 = 0) {
  const long long dk_off = (long long)bz * p.dk_sb + (long long)hk * p.dk_sh + col0;
  const long long dv_off = (long long)bz * p.dv_sb + (long long)hk * p.dv_sh + col0;
  store_rows<T, D>((unsigned char*)p.dk + 2 * dk_off, p.dk_sl, dk, p.scale, kv_row, p.S, t);
  store_rows<T, Dv>((unsigned char*)p.dv + 2 * dv_off, p.dv_sl, dv, 1.f, kv_row, p.S, t);
}

// One warpgroup's rows of an accumulator (C columns: thread rows 16 warp + g, + 8, pairs at columns 8 i + 2 t)
// rounded to T, times scale, into 64-column slabs of [64 rows][64] from slab0 in the 128B-swizzled layout of the
// TMA loads (the pair lands in 16-byte chunk (i % 8) ^ (row % 8) of slab i / 8; a warp's 8 rows hit 8 chunks).
template <class T, int C>
__device__ __forceinline__ void stage_rows_swizzled(unsigned slab0, const float (&acc)[C / 2], float scale, int warp,
                                                    int g, int t) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = 16 * warp + g + 8 * r;
#pragma unroll
    for (int i = 0; i < C / 8; ++i)
      st_shared_u32(slab0 + (i >> 3) * (64 * 128) + row * 128 + (((i & 7) ^ (row & 7)) << 4) + 4 * t,
                    Num<T>::pack(acc[4 * i + 2 * r] * scale, acc[4 * i + 2 * r + 1] * scale));
  }
}

// The CTA's epilogue through TMA stores (p.dkv_tma; the non-persistent kernels: the persistent one loads its next
// work tile into K / V as soon as its consumers reach the end marker). Once every consumer warp has retired its last
// GEMM (256-thread barrier: the v2's dQ and the wide kernel's S^T read K rows of the other warpgroup), each
// warpgroup stages its dK (scaled) and dV in the K / V slabs it owns (k_slab0 / v_slab0, the 64-column slabs from
// col_slab0 on, rows row0 ..) and one of its threads stores them, rows >= S outside the maps skipped. Against one
// global store per accumulator pair (store_dk_dv): the H200 profile of the D=128 document backward had 6.6 % of
// all stall samples on those stores (lg throttle), at the end of every CTA, before the next CTA of that SM starts.
template <class T, int DK, int DV>
__device__ __forceinline__ void store_dk_dv_tma(const AttnParams& p, unsigned k_slab0, unsigned v_slab0,
                                                const float (&dk)[DK / 2], const float (&dv)[DV / 2], int wg, int tid,
                                                int warp, int g, int t, int col_slab0, int row0, int hk, int bz) {
  named_bar_sync(kBarDkvFree, 256);
  stage_rows_swizzled<T, DK>(k_slab0, dk, p.scale, warp, g, t);
  stage_rows_swizzled<T, DV>(v_slab0, dv, 1.f, warp, g, t);
  fence_proxy_async_smem();  // the generic-proxy stores before the TMA unit reads them
  named_bar_sync(kBarDkvStaged0 + wg, 128);
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < DK / 64; ++s) tma_store_4d(&p.dk_map, k_slab0 + s * (64 * 128), 64 * (col_slab0 + s), row0, hk, bz);
#pragma unroll
    for (int s = 0; s < DV / 64; ++s) tma_store_4d(&p.dv_map, v_slab0 + s * (64 * 128), 64 * (col_slab0 + s), row0, hk, bz);
    tma_store_commit();
    tma_store_wait_read();
  }
}

// Persistent backward (kP), a consumer warp at its work tile's end marker, once its GEMMs of the tile retired
// and kv_info was read: releases K / V and the end slot like any other. hk, bz, kv_row (kv_info's kv0 + this
// thread's row offset) and the next bar_kv parity are read only now, for the epilogue and the next tile (held
// from the top of the tile they stay live through the loop and spill, see kv_phase).
template <int ST, class Cfg>
__device__ __forceinline__ void bwd_finish_work_tile(const Cfg& c, RingPos& pos, int row_offset, int lane, int& hk,
                                                     int& bz, int& kv_row, unsigned& kv_phase) {
  hk = ld_shared_s32(bwd_kv_info(c) + 4);
  bz = ld_shared_s32(bwd_kv_info(c) + 8);
  kv_row = ld_shared_s32(bwd_kv_info(c)) + row_offset;
  kv_phase = unsigned(ld_shared_s32(bwd_kv_info(c) + 12));
  __syncwarp();  // every lane's reads before lane 0's release
  if (lane == 0) {
    mbar_arrive(bwd_kv_empty(c));
    mbar_arrive(c.empty(pos.stage));
  }
  pos.template advance<ST>();
}

// kDqTma (FLEXATTN_SM90_BWD_V3, with kDqBulk): the dQ buffers are swizzled for the writer's TMA tensor
// reductions (dq_to_smem); false is the code that existed before the option.
// kP (kPersistent, FLEXATTN_SM90_BWD_PERSISTENT): the body runs once per work tile (tile loop below; kv0,
// hk, bz from the producer's kv_info), and the dQ buffers follow a ring position of their own (dqp: the
// tiles' end slots take stage positions but no dQ buffer).
template <class V, class T, int D, int Dv, bool kDqBulk = false, bool kDqTma = false, bool kP = false>
__device__ __forceinline__ void bwd_consumer(const AttnParams& p, const BwdCfg<D, Dv, kDqBulk, false, kDqTma>& c,
                                             int wg, int kv0, int hk, int bz) {
  using C = BwdCfg<D, Dv, kDqBulk, false, kDqTma>;
  const int tid = threadIdx.x & 127, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const unsigned k_half = c.k_half(wg), v_half = c.v_half(wg), ds_tile = c.ds_tile(wg);
  const bool do_dq = bwd_adds_dq<kDqBulk, kP>(p);
  RingPos pos{0, 0u};
  RingPos dqp{0, 0u};      // kP: position of the next dQ buffer use
  // kP: parity of bar_kv's next phase (from kv_info at each tile's end, so that neither it nor kv0 stays
  // live through the query-tile loop: with them the score_mod variants spilled 200-250 bytes at 240
  // registers, NVRTC 13.0).
  unsigned kv_phase = 0u;
  // Buffer gradients summed per warpgroup (bg_wg_store / bg_wg_flush): a tile's sums are added one tile later.
  constexpr bool kBgWg = bg_reduce<V>() == 2 && C::kBgScratch;
  static_assert(!kBgWg || C::ST >= 2, "a tile's sums wait in its stage's scratch while the next tile stores its own");
  auto bg_prev = [&] { return c.bg_buf(wg, pos.stage == 0 ? C::ST - 1 : pos.stage - 1); };  // the previous tile's
  while (true) {  // kP: one pass per work tile; otherwise one pass
  if constexpr (kP) {
    mbar_wait(c.bar_kv(), kv_phase);
    kv0 = ld_shared_s32(bwd_kv_info(c));
    if (kv0 < 0) {
      if constexpr (kDqBulk) {
        if (do_dq && wg == 1) dq_end_marker(c, dqp.stage, dqp.phase, tid);
      }
      break;
    }
  }
  int kv_row = kv0 + 64 * wg + 16 * warp + g;
  bool bg_pending = false;  // kBgWg: the previous tile's sums wait in its stage's scratch

  float dk[D / 2], dv[Dv / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dk[i] = 0.f;
#pragma unroll
  for (int i = 0; i < Dv / 2; ++i) dv[i] = 0.f;

  if constexpr (!kP) mbar_wait(c.bar_kv(), 0u);
  while (true) {
    mbar_wait(c.full(pos.stage), pos.phase);
    const unsigned info = c.info(pos.stage);
    const int q0 = ld_shared_s32(info);
    if (q0 < 0) {
      if constexpr (kBgWg) {  // the last tile's sums: every warp's stores before the barrier
        if (bg_pending) {
          named_bar_sync(kBarDsFull0 + wg, 128);
          bg_wg_flush<V>(p, bg_prev(), tid);
        }
      }
      if constexpr (kP) {  // this warp's GEMMs of the tile retired: see bwd_finish_work_tile
        bwd_finish_work_tile<C::ST>(c, pos, wg * 64 + 16 * warp + g, lane, hk, bz, kv_row, kv_phase);
      } else if constexpr (kDqBulk) {
        if (do_dq && wg == 1) {  // one end marker per dQ writer, in consecutive buffers
          dq_end_marker(c, pos.stage, pos.phase, tid);
          // (Not a loop over the writers: at D = 128 with per-row bulk dQ the loop's ring copy spilled 80 bytes,
          // nvcc 13.0.)
          if (bwd_dq_writer_count(bwd_dq_ordered<kDqBulk, kP>(p)) == 2) {
            RingPos nx = pos;
            nx.template advance<C::ST>();
            dq_end_marker(c, nx.stage, nx.phase, tid);
          }
        }
      }
      break;
    }
    if constexpr (kP) {  // kv0 again from kv_info (see kv_phase)
      kv0 = ld_shared_s32(bwd_kv_info(c));
      kv_row = kv0 + 64 * wg + 16 * warp + g;
    }
    const int h = ld_shared_s32(info + 4), b = ld_shared_s32(info + 8);
    const bool full = ld_shared_s32(info + 12) != 0;
    const unsigned q_tile = c.q_tile(pos.stage), do_tile = c.do_tile(pos.stage);

    float st[32], dpt[32], bg[kDiagPartials];
    issue_sdp<T, D, Dv>(st, dpt, k_half, v_half, q_tile, do_tile);
    wgmma_wait<0>();
    fence_operands(st);
    fence_operands(dpt);
    // Interior partial tiles should not take the edge path: there `in_bounds && mask_mod` branched per entry, so
    // mask_mod's buffer loads were serialized behind one branch each and could not be shared between the entries of
    // one query column (D=64 document backward, session 11 ncu: 64 LDG and 96 BSSY / BRA / BSYNC per thread per
    // partial tile, 37 % of the kernel's stall samples). D = Dv = 128 (dK and dV hold 128 registers per thread): they
    // do anyway, because their own copy spilled softcap + causal by 140 bytes (ptxas 13.0); the v2 kernel is the
    // default there.
    constexpr bool kInteriorPartial = D + Dv < 256;
    const bool inb = kv0 + C::BN <= p.S && q0 + C::BM <= p.L, full_tile = full || !V::kHasMaskMod;
    if constexpr (bg_reduce<V>() != 0)  // buffer gradients summed per warp (bwd_buffer_grad_sm90.cuh)
      dispatch_tile_kind<true, true, BgTileStep<V>>(inb, full_tile, st, dpt, bg, p, c.lse(pos.stage),
                                                    c.delta(pos.stage), b, h, q0, kv_row, t);
    else
      dispatch_tile_kind<kInteriorPartial, true, TileScoresStep<V>>(inb, full_tile, st, dpt, p, p.scale * kLog2e,
                                                                    c.lse(pos.stage), c.delta(pos.stage), b, h, q0,
                                                                    kv_row, t);
    unsigned pa[16];
    // Every warp's dQ of the previous tile reads all 64 rows of dS^T, and wgmma.wait_group only orders
    // the executing warp: no warp may overwrite the tile before all four have retired that GEMM.
    named_bar_sync(kBarDsFull0 + wg, 128);
    round_p_ds<T>(pa, st, dpt, ds_tile, warp, g, t);
    // dS^T written by all four warps must reach the async proxy before any wgmma reads it.
    fence_proxy_async_smem();
    named_bar_sync(kBarDsFull0 + wg, 128);

    issue_dkdv<T, D, Dv>(dk, dv, pa, ds_tile, q_tile, do_tile);
    if constexpr (kBgWg) {
      // The previous tile's scratch: this tile's two dS^T barriers came after every warp's stores into it.
      if (bg_pending) bg_wg_flush<V>(p, bg_prev(), tid);
      bg_wg_store<V>(bg, c.bg_buf(wg, pos.stage), b, h, q0, kv0 + 64 * wg, warp, lane);
      bg_pending = true;
    } else if constexpr (bg_reduce<V>() != 0) {
      bg_flush<V>(bg, p, b, h, q0, kv0 + 64 * wg + 16 * warp, lane);
    }
    wgmma_wait<0>();
    fence_operands(dk);
    fence_operands(dv);
    fence_operands(pa);
    // Q, dO, lse and delta of this stage are no longer read by this warp.
    if (lane == 0) mbar_arrive(c.empty(pos.stage));
    if constexpr (kDqBulk) {
      if (do_dq) {  // deterministic mode: the sm80 pass computes dQ, skip the GEMM too
        float dq[D / 2];
        issue_dq<T, D>(dq, ds_tile, k_half);
        wgmma_wait<0>();
        fence_operands(dq);
        // The n-th query tile uses dQ buffer n % 2 with phase (n / 2) % 2: the stage ring's position
        // (DQB == ST, and do_dq is the same for every tile).
        if constexpr (kP) {
          dq_to_smem(c, dqp.stage, dqp.phase, wg, dq, q0, b * p.Hq + h, tid, warp, g, t);
          dqp.template advance<C::DQB>();
        } else {
          dq_to_smem(c, pos.stage, pos.phase, wg, dq, q0, b * p.Hq + h, tid, warp, g, t);
        }
      }
    } else {
      float dq[D / 2];
      issue_dq<T, D>(dq, ds_tile, k_half);
      wgmma_wait<0>();
      fence_operands(dq);
      if (do_dq) add_dq<D>(p, dq, b, h, q0, warp, g, t);
    }
    pos.template advance<C::ST>();
  }

  // dK = scale * dS^T Q; dV as accumulated. With Bkv == 1 this CTA has summed every query batch.
  if (FLEXATTN_SM90_BWD_TMA_STORE && !kP && sm90_bwd_first_kernel_tma_store_ok(D, Dv) && p.dkv_tma != 0)
    store_dk_dv_tma<T, D, Dv>(p, k_half, c.v_half(wg), dk, dv, wg, tid, warp, g, t, 0, kv_row - 16 * warp - g, hk, bz);
  else
    store_dk_dv<T, D, Dv>(p, dk, dv, bz, hk, kv_row, t);
  if constexpr (!kP) break;
  }  // tile loop
}

}  // namespace flexattn::kern::sm90
