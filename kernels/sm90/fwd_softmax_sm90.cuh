#pragma once
// Element-wise work of the sm90 forward on a warpgroup's S accumulator (m64 x block_n, layout in
// ptx/wgmma.cuh): the FlexAttention score semantics (scale -> score_mod -> bounds -> mask_mod, as in
// variant.cuh and the sm80 family's masked_score_log2, which the fast path calls directly), the exp2
// online softmax, and the rounding of P into the register A operand of the P V wgmma.
#include "common/mod_ops.cuh"
#include "common/numeric.cuh"
#include "common/params.h"
#include "common/poly_exp2.cuh"
#include "common/poly_rcp.cuh"
#include "common/variant.cuh"
#include "sm80/scores_sm80.cuh"
#include "sm90/fwd_rel_diag_sm90.cuh"
#include "sm90/rel_affine_sm90.cuh"

namespace flexattn::kern::sm90 {

// The softmax runs on u, an order-preserving stand-in for the log2-unit score s' = u * c, c > 0, so that
// each entry's exp2 is one FFMA (u * c - m * c) plus the MUFU op, and the row max needs no multiply:
//   no score_mod: u = raw QK^T and c = scale * log2(e) (the host requires scale > 0 for this family,
//                 runtime/tma_sm90.cc), so a full tile costs FMNMX, FFMA, MUFU, FADD per entry;
//   score_mod:    u = score_mod(raw * scale) and c = log2(e).
// Masked entries are -inf in both. Against the sm80 family's s' = raw * (scale * log2 e) then exp2(s' - m)
// this moves the rounding of one multiply into the FFMA (<= 1 ulp of the exponent argument; the result
// is P, rounded to the input dtype for P V). The row max m stays in u units until the epilogue
// (fwd_consumer_sm90.cuh scales it by c for lse / max_score).
template <class V>
__device__ __forceinline__ float softmax_log2_factor(const AttnParams& p) {
  return V::kHasScoreMod ? kLog2e : p.scale * kLog2e;
}

// Masks that keep one interval of kv positions per query row (codegen's kKvRange and kv_range(p, b, h, q, lo, hi):
// mask_mod(b, h, q, kv) == (lo <= kv && kv <= hi) for every kv >= 0). A partial tile then tests each entry's
// column offset k (a compile-time number) against the row's bounds relative to the thread's first column:
// 2 ISETP with immediates + FSEL per entry, where the sliding window's mask_mod took IMAD.IADD, 2 ISETP, FSEL
// and a VIADD per column (ncu, session 16: partial tiles are 22 % of the sliding window's kv tiles).
// FLEXATTN_SM90_KV_RANGE=0 (the source generator leaves FLEXATTN_SM90_KV_RANGE_PATH out) evaluates mask_mod.
FLEXATTN_VARIANT_HOOK(KvRangeOf, kKvRange, bool, false)
template <class V>
__device__ __forceinline__ constexpr bool use_kv_range() {
#if defined(FLEXATTN_SM90_KV_RANGE_PATH)
  return V::kHasMaskMod && KvRangeOf<V>::value;
#else
  return false;
#endif
}
// Row r keeps the entries of column offset k with lo[r] <= k <= hi[r]: the bounds minus kvb (the thread's first
// column, kv_offset included), clamped into [-1, BN], so the comparisons stay exact for k in [0, BN).
struct KvRangeRows {
  int lo[2], hi[2];
};
template <class V, int BN>
__device__ __forceinline__ KvRangeRows kv_range_rows(const AttnParams& p, int b, int h, const int (&qw)[2], int kvb) {
  KvRangeRows rows{};
  if constexpr (use_kv_range<V>()) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      long long lo, hi;
      V::kv_range(p.mod, b, h, qw[r], lo, hi);
      lo -= kvb;
      hi -= kvb;
      rows.lo[r] = int(lo < -1 ? -1 : lo > BN ? BN : lo);
      rows.hi[r] = int(hi < -1 ? -1 : hi > BN ? BN : hi);
    }
  }
  return rows;
}
// mask_mod of entry (row e >> 1, column kvb + k), through the row bounds where the variant has them.
template <class V>
__device__ __forceinline__ bool mask_keeps(const AttnParams& p, int b, int h, const int (&qw)[2], int kvb,
                                           const KvRangeRows& rows, int e, int k) {
  if constexpr (use_kv_range<V>()) return k >= rows.lo[e >> 1] && k <= rows.hi[e >> 1];
  else return V::mask_mod(p.mod, b, h, qw[e >> 1], kvb + k);
}

template <class V, bool kFull>
__device__ __forceinline__ float score_u(const AttnParams& p, float raw, int b, int h, int qw, int kvw, bool in_bounds) {
  float u = raw;
  if constexpr (V::kHasScoreMod) u = V::score_mod(p.mod, raw * p.scale, b, h, qw, kvw);
  bool keep = in_bounds;
  if constexpr (!kFull && V::kHasMaskMod) keep = keep && V::mask_mod(p.mod, b, h, qw, kvw);
  return keep ? u : neg_inf();
}

// u of a tile inside [0, S): kFull = no mask_mod (a full tile, or a variant without one), else mask_mod
// on every entry. No kv wrap and no bounds: only the tail tile needs them.
template <class V, bool kFull, int BN>
__device__ __forceinline__ void scores_inside(float (&s)[BN / 2], const AttnParams& p, int b, int h,
                                              const int (&qw)[2], int kv0, int t) {
  if constexpr (!kFull && use_kv_range<V>()) {
    const int kvb = kv0 + p.kv_offset + 2 * t;
    const KvRangeRows rows = kv_range_rows<V, BN>(p, b, h, qw, kvb);
#pragma unroll
    for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int k = 8 * i + (e & 1);
        const float u = score_u<V, true>(p, s[4 * i + e], b, h, qw[e >> 1], kvb + k, true);
        s[4 * i + e] = mask_keeps<V>(p, b, h, qw, kvb, rows, e, k) ? u : neg_inf();
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int kv = kv0 + 8 * i + 2 * t + (e & 1);
        s[4 * i + e] = score_u<V, kFull>(p, s[4 * i + e], b, h, qw[e >> 1], kv + p.kv_offset, true);
      }
    }
  }
}

// ALiBi-shaped score_mods (rel_affine_sm90.cuh): per tile each row gets rb = slope * (kv0 + 2t - q) (an exact
// integer, one rounding) and each entry u = fma(slope, k, fma(raw, scale, rb)) with k = 8i + e the column offset.
template <class V, bool kFull, int BN>
__device__ __forceinline__ void scores_inside_affine(float (&s)[BN / 2], const AttnParams& p, int b, int h,
                                                     const int (&qw)[2], int kv0, int t, float slope) {
  const int kvb = kv0 + p.kv_offset + 2 * t;
  const float rb[2] = {slope * float(kvb - qw[0]), slope * float(kvb - qw[1])};
  const KvRangeRows rows = kFull ? KvRangeRows{} : kv_range_rows<V, BN>(p, b, h, qw, kvb);
#pragma unroll
  for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int k = 8 * i + (e & 1);
      float u = fmaf(s[4 * i + e], p.scale, rb[e >> 1]);
      if (k != 0) u = fmaf(slope, float(k), u);
      if constexpr (!kFull && V::kHasMaskMod) {
        if (!mask_keeps<V>(p, b, h, qw, kvb, rows, e, k)) u = neg_inf();
      }
      s[4 * i + e] = u;
    }
  }
}

// Relative-position gathers (codegen's kRelGather: score_mod = score + row(b, h)[sign * (q - kv) + c], an f32 row)
// with FLEXATTN_SM90_REL_GATHER (the source generator defines it; FLEXATTN_SM90_GATHER=0 leaves it out). A thread's
// entry (i, e) of row r reads row[base_r - sign * (8i + (e & 1))], base_r = sign * (qw[r] - kv0 - 2t) + c, and
// base_1 = base_0 + 8 sign when the thread's two rows are 8 apart (always, unless rows wrap past L), so row 1's
// entry i is row 0's entry i - 1: 34 loads at compile-time offsets of one pointer serve the 64 entries, and
// the clamp of the general form is one range check per tile (rel_gather_ok). The general form cost ~8
// instructions per entry (index, clamp, address, load, add): the relbias forward ran at half the dense speed.
// (RelGatherOf and use_rel_gather: rel_affine_sm90.cuh.)

// The tail tile (kv0 + BN > S) takes the same branch as a tile inside [0, S) of its kind, then this sets
// its lanes past S to `fill` (-inf; the softcap path's +inf). Those lanes' mods ran on kv itself, not on
// torch's kv % S: harmless, as their results are dropped here and the forward's mods have no side effects
// (codegen clamps buffer reads). A separate tail branch (a third copy of the tile's scores and softmax,
// with wrapped indices) was most of ptxas's and NVVM's time: the causal kernel compiled in 1.3-2.1 s of
// ptxas with it and 0.6 s without, the document kernel 2.4 s and 0.8 s (locally, session 14).
template <int BN>
__device__ __forceinline__ void drop_past_end(float (&s)[BN / 2], int kv0, int t, int S, float fill) {
#pragma unroll
  for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (kv0 + 8 * i + 2 * t + (e & 1) >= S) s[4 * i + e] = fill;
    }
  }
}

// A tile's relative-bias row: g[j][e] = row[base_0 + sign * (8 - 8j - e)], j = 0 .. BN/8, the offsets
// sign * [7 - BN, 8] around base_0 = sign * (q_0 - kv_0) + c (row 0's index at the thread's first column).
// ok: the offsets stay inside [0, n) and the thread's rows are 8 apart, so the fast path needs no clamp;
// otherwise (a bias shorter than the positions need, the tail tile, rows wrapping past L) the warp takes
// the clamped form (rel_gather_ok).
struct RelGatherTile {
  const float* row;
  long long base;
  int n;
  bool ok;
};
template <class V, int BN>
__device__ __forceinline__ RelGatherTile rel_gather_tile(const AttnParams& p, int b, int h, const int (&qw)[2], int kv0,
                                                         int t) {
  int c, n;
  const float* row = V::rel_gather(p.mod, b, h, c, n);
  constexpr int sg = RelGatherOf<V>::value;
  const long long base = sg * ((long long)qw[0] - (kv0 + p.kv_offset + 2 * t)) + c;
  const long long lo = base + (sg > 0 ? 7 - BN : -8), hi = base + (sg > 0 ? 8 : BN - 7);
  return {row, base, n, qw[1] == qw[0] + 8 && lo >= 0 && hi < n};
}
__device__ __forceinline__ bool rel_gather_ok(const RelGatherTile& g) { return __all_sync(0xffffffffu, g.ok); }

// The entries of a tile from g[j][e] = the bias at row 0's distance q_0 - (kv0 + 2t) + 8 - 8j - e (kRelGather's
// row, kRelDiag's table): row 0's entry i is g[i + 1], row 1's (8 rows below) g[i]. kFull: no mask_mod. full
// (kClamp only): the tile skips mask_mod.
template <class V, bool kFull, bool kClamp, int BN>
__device__ __forceinline__ void scores_from_rel_row(float (&s)[BN / 2], const float (&g)[BN / 8 + 1][2],
                                                    const AttnParams& p, int b, int h, const int (&qw)[2], int kv0,
                                                    int t, bool full) {
  const int kvb = kv0 + p.kv_offset + 2 * t;
#pragma unroll
  for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float u = fmaf(s[4 * i + e], p.scale, e < 2 ? g[i + 1][e] : g[i][e - 2]);
      if constexpr (!kFull && V::kHasMaskMod) {
        // (mask_mod itself, not kv_range: the row bounds' 4 registers spilled relbias + causal at D = 128)
        if (!(kClamp && full) && !V::mask_mod(p.mod, b, h, qw[e >> 1], kvb + 8 * i + (e & 1))) u = neg_inf();
      }
      s[4 * i + e] = u;
    }
  }
}

// kClamp = false: the fast path, 34 loads at immediate offsets of one pointer. kClamp = true: the general
// form, each of the 34 indices clamped as codegen clamps score_mod's (fa_clamp_index32), so the result is
// score_mod's own; rows past L, whose second row is not 8 above the first, and lanes past S (dropped by the
// caller) read clamped entries that nothing uses. full (kClamp only): the tile skips mask_mod. This form
// replaced score_mod per entry with wrapped kv (session 14): that branch's 32 wrap loops were 0.8 s of
// NVVM's time, and without the loops ptxas gathered its 64 loads together and spilled 92-192 bytes.
template <class V, bool kClamp, int BN>
__device__ __forceinline__ void rel_gather_load(float (&g)[BN / 8 + 1][2], const RelGatherTile& gt) {
  constexpr int sg = RelGatherOf<V>::value;
  const float* base = gt.row + gt.base;
#pragma unroll
  for (int j = 0; j <= BN / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int off = sg * (8 - 8 * j - e);
      g[j][e] = kClamp ? __ldg(gt.row + fa_clamp_index32(int(gt.base + off), gt.n)) : __ldg(base + off);
    }
  }
}
template <class V, bool kFull, bool kClamp, int BN>
__device__ __forceinline__ void scores_inside_rel_gather(float (&s)[BN / 2], const AttnParams& p, int b, int h,
                                                         const int (&qw)[2], int kv0, int t, const RelGatherTile& gt,
                                                         bool full = false) {
  float g[BN / 8 + 1][2];
  rel_gather_load<V, kClamp, BN>(g, gt);
  scores_from_rel_row<V, kFull, kClamp, BN>(s, g, p, b, h, qw, kv0, t, full);
}

// FLEXATTN_SM90_REL_PREFETCH (the source generator defines it for rel-gather variants under
// FLEXATTN_SM90_GATHER_PREFETCH, the default since session 29: relbias_full D=128 +10 % on an H100): the fast
// path's 34 loads are issued while S is computed (rel_tile_prepare, beside the distance tables' fill) instead of
// after the wait for S, where their latency sat on the softmax's critical path (SASS, session 28). The clamped form
// still loads in the softmax.
template <class V>
__device__ __forceinline__ constexpr bool use_rel_prefetch() {
#if defined(FLEXATTN_SM90_REL_PREFETCH)
  return use_rel_gather<V>();
#else
  return false;
#endif
}

// What the consumer prepares for a kv tile's bias while its S is computed: the distance table's read address
// (kRelDiag) or the prefetched row gathers (use_rel_prefetch); unused otherwise.
template <int BN>
struct RelTile {
  unsigned diag_from = 0;
  RelGatherTile gather{};
  float g[BN / 8 + 1][2];
};
template <class V, int BN>
__device__ __forceinline__ void rel_tile_prepare(RelTile<BN>& r, const RelDiagWarp& w, const AttnParams& p, int b,
                                                 int h, const int (&qw)[2], int kv0, int t) {
  r.diag_from = rel_diag_tile<V, BN>(w, p, b, h, kv0);
  if constexpr (use_rel_prefetch<V>()) {
    r.gather = rel_gather_tile<V, BN>(p, b, h, qw, kv0, t);
    if (r.gather.ok) rel_gather_load<V, false, BN>(r.g, r.gather);  // else the warp takes the clamped form
  }
}

// kRelDiag (fwd_rel_diag_sm90.cuh): the same entries from the warp's table, `from` = rel_diag_fill's address.
template <class V, bool kFull, int BN>
__device__ __forceinline__ void scores_inside_rel_diag(float (&s)[BN / 2], const AttnParams& p, int b, int h,
                                                       const int (&qw)[2], int kv0, int t, unsigned from) {
  float g[BN / 8 + 1][2];
  rel_diag_read<BN>(g, from);
  scores_from_rel_row<V, kFull, false, BN>(s, g, p, b, h, qw, kv0, t, false);
}

// Independent chains for the row max and the row sum of online_softmax: four with
// FLEXATTN_SM90_SOFTMAX_ILP (max chains 4 deep instead of 16 at block_n 128, FADD chains 8 deep instead
// of 32), else one. One chain is the plain sequential loop (same operations in the same order, so the
// same SASS as the loop written out).
#if defined(FLEXATTN_SM90_SOFTMAX_ILP)
constexpr int kSoftmaxChains = 4;
#else
constexpr int kSoftmaxChains = 1;
#endif

// FLEXATTN_SM90_POLY_EXP2 = k (1..4): entries n of a row with n % 8 < k (k eighths of each tile) take
// poly_exp2 (FMA pipe) instead of ex2.approx (MUFU), whose 16 results per clock and SM are the softmax's
// narrowest pipe at D = 64 (one exp2 per entry against 256 tensor-core flops) and with softcap (two more
// MUFU ops per entry). Same result to ~2 ulp either way.
#if defined(FLEXATTN_SM90_POLY_EXP2)
constexpr int kPolyExp2Of8 = FLEXATTN_SM90_POLY_EXP2;
#else
constexpr int kPolyExp2Of8 = 0;
#endif
static_assert(kPolyExp2Of8 >= 0 && kPolyExp2Of8 <= 4, "FLEXATTN_SM90_POLY_EXP2: 0..4 eighths");

// max (kMin: min) of m and row r of s over kC chains (chain k takes the atoms i with i % kC == k), joined at
// the end: max and min are exact in any order.
template <int kC, int BN, bool kMin = false>
__device__ __forceinline__ float row_extreme(const float (&s)[BN / 2], int r, float m) {
  static_assert(kC == 1 || kC == 4, "one or four chains");
  static_assert(BN / 8 >= kC, "a chain per atom at most");
  auto pick = [](float a, float b) { return kMin ? fminf(a, b) : fmaxf(a, b); };
  float part[kC];
#pragma unroll
  for (int i = 0; i < BN / 8; ++i) {
    const float pair = pick(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]);
    part[i % kC] = i >= kC ? pick(part[i % kC], pair) : i == 0 ? pick(m, pair) : pair;
  }
  if constexpr (kC == 1) return part[0];
  else return pick(pick(part[0], part[1]), pick(part[2], part[3]));
}
template <int kC, int BN>
__device__ __forceinline__ float row_max(const float (&s)[BN / 2], int r, float m) {
  return row_extreme<kC, BN>(s, r, m);
}

// Row r of s becomes P = exp2(s c - mc) in place; returns the row's sum over kC chains (entry n = 2i + j
// goes to chain n % kC). With four chains the order of the sum changes, not its error bound (a sum of
// BN / 2 positives, rounded in f32). One chain starts from 0 (0 + P is not folded to P: it differs
// for -0), exactly as the plain loop did.
template <int kC, int BN>
__device__ __forceinline__ float exp2_row_sum(float (&s)[BN / 2], int r, float c, float mc) {
  static_assert(kC == 1 || kC == 4, "one or four chains");
  float part[kC];
#pragma unroll
  for (int k = 0; k < kC; ++k) part[k] = 0.f;
#pragma unroll
  for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int n = 2 * i + j;
      const float arg = fmaf(s[4 * i + 2 * r + j], c, -mc);
      const float pv = n % 8 < kPolyExp2Of8 ? poly_exp2(arg) : fast_exp2(arg);
      s[4 * i + 2 * r + j] = pv;
      part[n % kC] = kC > 1 && n < kC ? pv : part[n % kC] + pv;
    }
  }
  if constexpr (kC == 1) return part[0];
  else return (part[0] + part[1]) + (part[2] + part[3]);
}

// The lazy reference max (FLEXATTN_SM90_LAZY_RESCALE, and always on the softcap path): the exponent's reference
// max mr moves only when the running max mx (already including m) passes it by more than 8 log2 units (values
// times c > 0), so P <= 2^8 (exact in bf16/f16 up to the usual rounding, l in f32); otherwise alpha = 1 and the
// consumer skips the O rescale when its whole warp kept mr. lse uses mr (consistent with l); m stays the true
// running max for max_score. Both -inf: NaN > 8 is false, keep. Returns the exponent's offset mr * c (0 while
// mr is -inf, so exp2(-inf) = 0 and nothing becomes NaN).
__device__ __forceinline__ float lazy_reference(float mx, float c, float& m, float& mr, float& alpha) {
  const bool move = (mx - mr) * c > 8.f;
  const float mref = move ? mx : mr;
  const float mu = mref == neg_inf() ? 0.f : mref;
  const float mc = mu * c;
  alpha = move ? fast_exp2(fmaf(mr, c, -mc)) : 1.f;
  mr = mref;
  m = mx;
  return mc;
}

// One kv tile of the online softmax: s (u units, -inf = masked) becomes P in place; m is the running
// row max (u units), l the thread's partial row sum (quad-reduced once, in the epilogue); alpha =
// exp2((m_old - m_new) c) is returned for the O rescale, which waits until the in-flight P V retires. A
// row whose max is still -inf subtracts 0 instead, so exp2(-inf) = 0 and nothing becomes NaN.
template <int BN>
__device__ __forceinline__ void online_softmax(float (&s)[BN / 2], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                               float c, float (&mr)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float mx = row_max<kSoftmaxChains, BN>(s, r, m[r]);
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
#if defined(FLEXATTN_SM90_LAZY_RESCALE)
    const float mc = lazy_reference(mx, c, m[r], mr[r], alpha[r]);
#else
    const float mu = mx == neg_inf() ? 0.f : mx;
    const float mc = mu * c;
    alpha[r] = fast_exp2(fmaf(m[r], c, -mc));
    m[r] = mx;
#endif
    const float rs = exp2_row_sum<kSoftmaxChains, BN>(s, r, c, mc);
    l[r] = l[r] * alpha[r] + rs;
  }
}

// Softcap (codegen's kSoftcap: score_mod = u * tanh(score * k), u and k uniform) with FLEXATTN_SM90_SOFTCAP=1
// (the source generator defines FLEXATTN_SM90_SOFTCAP_PATH). u tanh(x) = |u| tanh(sgn(u) x), so with the
// score scale, k, sgn(u) and 2 log2(e) in one constant k2 the tile's entries become t = raw * k2 (one FMUL
// instead of two) and, in log2 units, w = |u| log2(e) (1 - 2 r) with r = 1 / (2^t + 1) (fa_tanh_rcp: two MUFU
// ops, as the general path), decreasing in r. So the softmax keeps r in s (masked: +inf), takes the row's
// minimum r for its max (one FMNMX per entry, no FFMA for the score) and folds w into the exponent:
// P = exp2(fma(a, r, top - m_ref)), a = -2 |u| log2(e), top = |u| log2(e). Per entry FMUL, 2 MUFU, FADD,
// FMNMX, FFMA, MUFU, FADD instead of 2 FMUL, 2 MUFU, FADD, 2 FFMA, FMNMX, MUFU, FADD. The reference max moves
// as FLEXATTN_SM90_LAZY_RESCALE's does (by more than 8 in log2), at every head dim; m and m_ref stay in
// log2 units. Same formula as fa_mul_tanh; the roundings of the folded constants differ by ulps. a is at most
// -1e-30, so a masked entry's +inf gives -inf even for u = 0 (whose scores are all 0: P uniform).
FLEXATTN_VARIANT_HOOK(SoftcapOf, kSoftcap, bool, false)
template <class V>
__device__ __forceinline__ constexpr bool use_softcap() {
#if defined(FLEXATTN_SM90_SOFTCAP_PATH)
  return SoftcapOf<V>::value;
#else
  return false;
#endif
}
// kSoftcapApprox (the mod's tanh is tanh_approx): the tile keeps r = -tanh(sgn(u) x) from one tanh.approx
// (fa_tanh_approx) instead of 1 / (2^t + 1) from two MUFU ops; in log2 units w = -|u| log2(e) r, again
// decreasing in r, so the rest of the path (row minimum of r, the exponent's FFMA, masked = +inf) is the same
// with a = -|u| log2(e) and top = 0, and the sign and the score scale fold into k2. Two MUFU ops per entry
// instead of three: the softmax's MUFU time per tile matches the tensor cores' at D = 128.
FLEXATTN_VARIANT_HOOK(SoftcapApproxOf, kSoftcapApprox, bool, false)
// FLEXATTN_SM90_SOFTCAP_RCP = k (1..8): entries n of a row with n % 8 < k take the tanh's reciprocal on the FMA
// pipe (poly_tanh_rcp: IADD + 5 FFMA + a NaN-keeping clamp) instead of rcp.approx on the MUFU. Per 32 entries
// the score phase issues ~6 instructions but holds the MUFU for 16 cycles (two ops of 8); all on the FMA pipe
// it is ~12 issued against 8, k = 6 near the balance (~10.5 either way). Within 1 ulp of 1 / y either way.
#if defined(FLEXATTN_SM90_SOFTCAP_RCP)
constexpr int kSoftcapRcpOf8 = FLEXATTN_SM90_SOFTCAP_RCP;
#else
constexpr int kSoftcapRcpOf8 = 0;
#endif
static_assert(kSoftcapRcpOf8 >= 0 && kSoftcapRcpOf8 <= 8, "FLEXATTN_SM90_SOFTCAP_RCP: 0..8 eighths");

using SoftcapTile = FaSoftcapFold;  // k2, a, top: common/mod_ops.cuh fa_softcap_fold
template <class V>
__device__ __forceinline__ SoftcapTile softcap_tile(const AttnParams& p) {
  if constexpr (use_softcap<V>()) {
    float u, k;
    V::softcap(p.mod, u, k);
    return fa_softcap_fold(u, k, p.scale, SoftcapApproxOf<V>::value);
  } else {
    return {0.f, 0.f, 0.f};
  }
}

// r of every entry (+inf where masked); kMask: mask_mod per entry.
template <class V, bool kMask, int BN>
__device__ __forceinline__ void scores_softcap(float (&s)[BN / 2], const AttnParams& p, int b, int h,
                                               const int (&qw)[2], int kv0, int t, const SoftcapTile& sc) {
  const int kvb = kv0 + p.kv_offset + 2 * t;
  const KvRangeRows rows = kMask ? kv_range_rows<V, BN>(p, b, h, qw, kvb) : KvRangeRows{};
#pragma unroll
  for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float t = s[4 * i + e] * sc.k2;
      float r;
      if constexpr (SoftcapApproxOf<V>::value) r = fa_tanh_approx(t);
      else r = (2 * i + (e & 1)) % 8 < kSoftcapRcpOf8 ? poly_tanh_rcp(t) : fa_tanh_rcp(t);
      bool keep = true;
      if constexpr (kMask && V::kHasMaskMod) keep = mask_keeps<V>(p, b, h, qw, kvb, rows, e, 8 * i + (e & 1));
      s[4 * i + e] = keep ? r : pos_inf();
    }
  }
}

template <int BN>
__device__ __forceinline__ void online_softmax_softcap(float (&s)[BN / 2], float (&m)[2], float (&l)[2],
                                                       float (&alpha)[2], float (&mr)[2], const SoftcapTile& sc) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float rmin = row_extreme<kSoftmaxChains, BN, true>(s, r, pos_inf());
    rmin = fminf(rmin, __shfl_xor_sync(0xffffffffu, rmin, 1));
    rmin = fminf(rmin, __shfl_xor_sync(0xffffffffu, rmin, 2));
    const float mx = fmaxf(m[r], fmaf(sc.a, rmin, sc.top));  // rmin = +inf (all masked): -inf
    const float mu = lazy_reference(mx, 1.f, m[r], mr[r], alpha[r]);  // log2 units: c = 1
    const float rs = exp2_row_sum<kSoftmaxChains, BN>(s, r, sc.a, mu - sc.top);
    l[r] = l[r] * alpha[r] + rs;
  }
}

// Scores then softmax of one tile, in two specialisations: a tile that needs no mask_mod (a full tile,
// or any tile of a variant without mask_mod) and a partial tile (mask_mod: the diagonal of causal and the
// edges of windows and documents, most tiles of sparse masks); the tail tile (kv0 + BN > S) takes its
// kind's branch and drop_past_end (a variant without mask_mod: the second branch). Rel-gather variants
// have a third branch, the clamped form of their gathers, for their tail and for tiles whose gathers leave
// the row. Rel-diag and prefetching rel-gather variants read `rel` (rel_tile_prepare's, for this tile).
// The softmax sits *inside* each branch on purpose: ptxas 13.0 hoists a wgmma.wait_group to the top of
// the basic block it lives in, so with the branch join before the softmax the wait for the in-flight
// P V landed above the row max and the exp2s no longer overlapped it (seen in the SASS; session 14's
// first cut had a single branch for variants without mask_mod, and so that hoist: full D=128 654 vs 677).
template <class V, int BN>
__device__ __forceinline__ void scores_softmax(float (&s)[BN / 2], const AttnParams& p, int b, int h,
                                               const int (&qw)[2], int kv0, bool full, int t, float (&m)[2],
                                               float (&l)[2], float (&alpha)[2], float (&mr)[2], float slope,
                                               const SoftcapTile& sc, const RelTile<BN>& rel) {
  const bool tail = kv0 + BN > p.S;
  // The first branch: a tile that needs no mask_mod; for a variant without mask_mod only the tiles that are
  // not the tail, so that it still has two branches and the softmax a branch join below it (see above);
  // the rel-gather variants' tails take their clamped form instead.
  const bool no_mask = V::kHasMaskMod ? full : use_rel_gather<V>() || !tail;
  if constexpr (use_softcap<V>()) {
    if (no_mask) {
      scores_softcap<V, false, BN>(s, p, b, h, qw, kv0, t, sc);
      if (tail) drop_past_end<BN>(s, kv0, t, p.S, pos_inf());
      online_softmax_softcap<BN>(s, m, l, alpha, mr, sc);
    } else {
      scores_softcap<V, true, BN>(s, p, b, h, qw, kv0, t, sc);
      if (tail) drop_past_end<BN>(s, kv0, t, p.S, pos_inf());
      online_softmax_softcap<BN>(s, m, l, alpha, mr, sc);
    }
    return;
  }
  const float c = softmax_log2_factor<V>(p);
  // Rel-gather variants send a tile whose gathers leave the row, and their tail, to the clamped form.
  RelGatherTile gather{};
  bool general = false;
  if constexpr (use_rel_gather<V>()) {
    gather = use_rel_prefetch<V>() ? rel.gather : rel_gather_tile<V, BN>(p, b, h, qw, kv0, t);
    general = tail || !rel_gather_ok(gather);
  }
  if (!general && no_mask) {
    if constexpr (use_rel_affine<V>()) scores_inside_affine<V, true, BN>(s, p, b, h, qw, kv0, t, slope);
    else if constexpr (use_rel_prefetch<V>()) scores_from_rel_row<V, true, false, BN>(s, rel.g, p, b, h, qw, kv0, t, false);
    else if constexpr (use_rel_gather<V>()) scores_inside_rel_gather<V, true, false, BN>(s, p, b, h, qw, kv0, t, gather);
    else if constexpr (use_rel_diag<V>()) scores_inside_rel_diag<V, true, BN>(s, p, b, h, qw, kv0, t, rel.diag_from);
    else scores_inside<V, true, BN>(s, p, b, h, qw, kv0, t);
    if (tail) drop_past_end<BN>(s, kv0, t, p.S, neg_inf());
    online_softmax<BN>(s, m, l, alpha, c, mr);
  } else if (!general) {
    if constexpr (use_rel_affine<V>()) scores_inside_affine<V, false, BN>(s, p, b, h, qw, kv0, t, slope);
    else if constexpr (use_rel_prefetch<V>()) scores_from_rel_row<V, false, false, BN>(s, rel.g, p, b, h, qw, kv0, t, false);
    else if constexpr (use_rel_gather<V>()) scores_inside_rel_gather<V, false, false, BN>(s, p, b, h, qw, kv0, t, gather);
    else if constexpr (use_rel_diag<V>()) scores_inside_rel_diag<V, false, BN>(s, p, b, h, qw, kv0, t, rel.diag_from);
    else scores_inside<V, false, BN>(s, p, b, h, qw, kv0, t);
    if (tail) drop_past_end<BN>(s, kv0, t, p.S, neg_inf());
    online_softmax<BN>(s, m, l, alpha, c, mr);
  } else if constexpr (use_rel_gather<V>()) {
    scores_inside_rel_gather<V, false, true, BN>(s, p, b, h, qw, kv0, t, gather, full);
    if (tail) drop_past_end<BN>(s, kv0, t, p.S, neg_inf());
    online_softmax<BN>(s, m, l, alpha, c, mr);
  }
}

// O *= alpha per row. With FLEXATTN_SM90_LAZY_RESCALE skipped when the whole warp kept its reference max (alpha = 1).
template <int DV>
__device__ __forceinline__ void rescale_o(float (&o)[DV / 2], const float (&alpha)[2]) {
#if defined(FLEXATTN_SM90_LAZY_RESCALE)
  if (!__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) return;
#endif
#pragma unroll
  for (int i = 0; i < DV / 8; ++i) {
    o[4 * i] *= alpha[0];
    o[4 * i + 1] *= alpha[0];
    o[4 * i + 2] *= alpha[1];
    o[4 * i + 3] *= alpha[1];
  }
}

// P rounded to T (before P V, as the reference casts P to the input dtype), packed in A-operand order:
// k-step ks uses pa[4ks .. 4ks+3].
template <class T, int BN>
__device__ __forceinline__ void pack_p(unsigned (&pa)[BN / 4], const float (&s)[BN / 2]) {
#pragma unroll
  for (int j = 0; j < BN / 4; ++j) pa[j] = Num<T>::pack(s[2 * j], s[2 * j + 1]);
}

}  // namespace flexattn::kern::sm90
