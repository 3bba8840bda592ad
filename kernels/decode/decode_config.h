#pragma once
// Tiles and launch geometry of the decode family (short queries, split-KV; docs/kernels_decode.md).
// Host C++ and device code share it, like sm80/tile_config.h.
//
// A CTA owns block_m packed rows (pack_heads query heads x L query rows of one kv head) and one split
// of the kv range. Its warps form warp_rows x warp_cols: each warp holds 16 rows against block_n /
// warp_cols kv columns of every tile with its own running max / sum / output (no cross-warp traffic in
// the loop), and the warps are merged once in the epilogue through shared memory.
#include "common/params.h"

namespace flexattn::kern {

constexpr int kDecodeMaxRows = 64;     // query rows per sequence the decode family takes
constexpr int kDecodeMaxSplits = 128;  // kv splits per row tile
constexpr int kDecodeCombineWarps = 4; // one row per warp
// K/V ring stages. The generated source may define FLEXATTN_DECODE_STAGES (2..4; the host's
// decode_stages(), env FLEXATTN_DECODE_STAGES) before including this header; the host passes its value to
// the smem / launch functions below, whose default is this one (the kernels' own).
#ifndef FLEXATTN_DECODE_STAGES
#define FLEXATTN_DECODE_STAGES 2
#endif
constexpr int kDecodeStages = FLEXATTN_DECODE_STAGES;
static_assert(kDecodeStages >= 2 && kDecodeStages <= 4, "decode ring: 2..4 stages");
// FLEXATTN_DECODE_BULK=1 in the generated source (sm_90a; env FLEXATTN_DECODE_BULK): the K/V ring is
// filled by one cp.async.bulk per row completing on an mbarrier per stage (decode_bulk.cuh).
#ifndef FLEXATTN_DECODE_BULK
#define FLEXATTN_DECODE_BULK 0
#endif
// FLEXATTN_DECODE_PREFETCH=k (sm_90a, either ring): rows are also prefetched into L2 (a row per thread),
// k = 1: the tile after the ring's last, one iteration before it is issued; k >= 2 (walks without a block
// mask): k - 1 tiles further (env FLEXATTN_DECODE_PREFETCH).
#ifndef FLEXATTN_DECODE_PREFETCH
#define FLEXATTN_DECODE_PREFETCH 0
#endif
// FLEXATTN_DECODE_CLUSTER=1 in the generated source (sm_90a; env FLEXATTN_DECODE_CLUSTER): the kernel merges
// the splits itself when the host launches the splits of a row tile as one thread-block cluster
// (decode_launch_plan): partials stay in each CTA's shared memory and are combined through distributed
// shared memory, with no workspace and no combine kernel. The kernel tells the two launches apart by its
// cluster size, so without a cluster (1 split, or more than kDecodeClusterMax) it runs the usual path.
#ifndef FLEXATTN_DECODE_CLUSTER
#define FLEXATTN_DECODE_CLUSTER 0
#endif
constexpr int kDecodeClusterMax = 8;  // the portable cluster size: splits 2..8 take the cluster path
// FLEXATTN_DECODE_MERGE=1 in the generated source (env FLEXATTN_DECODE_MERGE): with p.split_counters set, the
// last split of each row tile to finish merges the tile's partials itself (attn_decode.cuh, decode_merge_last),
// and the host launches no combine kernel.
#ifndef FLEXATTN_DECODE_MERGE
#define FLEXATTN_DECODE_MERGE 0
#endif
// The merge reads every split's (max, sum) and partial of a float4 in one round trip to L2 (all loads issued
// before any is used), which needs the split count bounded; calls with more splits (1x128k: ~48) keep the
// combine kernel, whose lanes run over the splits.
constexpr int kDecodeMergeMaxSplits = 8;
// FLEXATTN_DECODE_ROW_SPLIT=1 in the generated source (env FLEXATTN_DECODE_ROW_SPLIT): a walk without a block
// mask splits its kv rows, not its 64-row tiles, evenly (ceil(kvl / splits) rows each; the last tile of a split
// is partial). With tile splits 8x8k's 128 tiles over 6 splits give 22 tiles to the longest split against 21.3 on
// average: the call waits for the 3 % more bytes of its longest CTAs.
#ifndef FLEXATTN_DECODE_ROW_SPLIT
#define FLEXATTN_DECODE_ROW_SPLIT 0
#endif
// FLEXATTN_DECODE_WARP_RING=1 in the generated source (sm_90a with the bulk ring; env FLEXATTN_DECODE_WARP_RING):
// where each warp owns 16 kv columns of every tile (one 16-row query tile: the m16 kernels), the warp copies its
// own 16 K and 16 V rows (a row per lane) on its own mbarrier per stage and waits for them alone, so the main
// loop has no CTA barrier: each warp streams its slice of the ring at its own pace, and reissues a stage as soon
// as it has read it. Other tiles (m64: every warp reads every column) keep the CTA-wide ring.
#ifndef FLEXATTN_DECODE_WARP_RING
#define FLEXATTN_DECODE_WARP_RING 0
#endif
// FLEXATTN_DECODE_TMA=1 in the generated source (sm_90a with the bulk ring; env FLEXATTN_DECODE_TMA): the source also
// defines flexattn_decode_m16_tma / _m64_tma (head dims decode_tma_dims), whose ring is filled by TMA boxes through
// p.k_map / p.v_map (decode_tma.cuh); the host launches them for contiguous caches (runtime/decode_tma.h).
#ifndef FLEXATTN_DECODE_TMA
#define FLEXATTN_DECODE_TMA 0
#endif
// Head dims the TMA entries take: whole 64-column boxes of K and V, up to 128. Above (32-row tiles) they compile but
// have not run on a GPU (s44b.sh's checks had no contiguous case there), so those head dims keep the bulk rows.
FLEXATTN_HD constexpr bool decode_tma_dims(int d, int dv) { return d % 64 == 0 && dv % 64 == 0 && d <= 128 && dv <= 128; }
// FLEXATTN_DECODE_TMA_BOX (env, 16 or 64; a #define when not 64): rows per TMA box. A tile is loaded in boxes of that
// many rows, and a split's last tile only in the boxes that reach its end: with 64-row boxes the TMA reads up to 63
// rows past each split (8x8k, s44b.sh ncu: 275.4 MB from DRAM for 268.5 MB of K and V). 16 is opt-in until a GPU has
// run it (bench/lab/round/s44c.sh); 64 is what s44b.sh checked and measured.
#ifndef FLEXATTN_DECODE_TMA_BOX
#define FLEXATTN_DECODE_TMA_BOX 64
#endif
// FLEXATTN_DECODE_TMA_WHOLE (env 0 / 1; a #define when 1): each TMA box holds whole rows, [box rows][D / 64 pieces][64
// columns], one contiguous block of K or V, instead of one box per 64 columns ([box rows][64], half of each 256-byte row
// at D = 128, the other half a second box). Shared memory then holds a row's pieces side by side (decode_tma.cuh,
// WholeRows). Opt-in until a GPU has run it (bench/lab/round/s44c.sh).
#ifndef FLEXATTN_DECODE_TMA_WHOLE
#define FLEXATTN_DECODE_TMA_WHOLE 0
#endif
// FLEXATTN_DECODE_EVICT_FIRST (env 0 / 1 / 2; a #define when not 0): the sm_90a entries' K and V loads (TMA boxes and
// bulk rows) take an L2 evict_first policy where each K / V byte is read once (decode_kv_read_once; evict_normal
// elsewhere); 2 (host only) also counts paged caches at B > 1 as read once, their pages taken as unshared. At normal
// priority such a step's lines evict whatever L2 held, and the dirty lines among it (the previous kernels' outputs;
// the benchmark's L2 flush leaves ~50 MB of them) are written back to DRAM during the step, on the DRAM the K / V
// reads need. Opt-in until a GPU has run it.
#ifndef FLEXATTN_DECODE_EVICT_FIRST
#define FLEXATTN_DECODE_EVICT_FIRST 0
#endif
// Whether a decode launch reads each K / V byte once: all query heads of a kv head packed into one tile (pack == G =
// Hq / Hkv; per-head masks pack 1), one row tile of them (row_tiles: the grid's x), one pass over the kv tiles (a
// tile of L > 1 rows straddling block-mask rows walks once per mask row: one_pass = L == 1 or no block mask), and a
// kv batch per query batch: a broadcast cache (Bkv = 1) is read by every batch's CTAs, and the page tables of a paged
// pool may share pages between sequences (a common prefix), so such caches (pages_may_share: paged, unless
// FLEXATTN_DECODE_EVICT_FIRST=2 says otherwise) count only at B = 1.
FLEXATTN_HD constexpr bool decode_kv_read_once(int pack, int G, int row_tiles, bool one_pass, int B, int Bkv,
                                               bool pages_may_share) {
  return pack == G && row_tiles == 1 && one_pass && (pages_may_share ? B == 1 : (Bkv == B || B == 1));
}
struct DecodeRowRange {
  int row0, end;
};
// Split `split` of `splits`' rows [row0, end) of kv_len: ceil(kv_len / splits) each, the last ones shorter or
// empty; together every row exactly once.
FLEXATTN_HD constexpr DecodeRowRange decode_row_split(int kv_len, int splits, int split) {
  const long long per = ((long long)kv_len + splits - 1) / splits, r0 = split * per;
  return DecodeRowRange{(int)(r0 < kv_len ? r0 : kv_len), (int)(r0 + per < kv_len ? r0 + per : kv_len)};
}
// Paged caches: the physical page of each kv row of a tile is read from the page table once, into one
// of kDecodePageSlots slots (one per K/V ring stage): block_n int32 page ids and 64 unmapped-row bits.
constexpr int kDecodePageSlots = kDecodeStages;

struct DecodeTile {
  int block_m, block_n, warp_rows, warp_cols;
};

FLEXATTN_HD constexpr int decode_dmax(int d, int dv) { return d > dv ? d : dv; }

// block_n: 64 kv rows up to head dim 128 (two K+V stages = 68 KiB at D=128, three CTAs per H200 SM);
// 32 above, so D=256 stays at 68 KiB.
FLEXATTN_HD constexpr DecodeTile decode_tile(int block_m, int d, int dv) {
  const int bn = decode_dmax(d, dv) <= 128 ? 64 : 32;
  const int wr = block_m / 16;
  const int wc_max = bn / 16, wc_fit = 4 / wr > 0 ? 4 / wr : 1;
  return DecodeTile{block_m, bn, wr, wc_max < wc_fit ? wc_max : wc_fit};
}

// The compiled row tiles: 16 (one query row of up to 16 heads, the common decode step) and 64. Above
// head dim 128 only 16: the 64-row tile keeps a 16 x 256 fp32 output per warp and spills 16 B with the
// heavier mods (relbias, text:mixed); larger packs then take several 16-row tiles (K/V re-read from L2).
// The TMA box rows at head dims (d, dv) for a tuned box (FLEXATTN_DECODE_TMA_BOX): at most the tile's block_n.
FLEXATTN_HD constexpr int decode_tma_box_rows(int d, int dv, int tuned) {
  return tuned < decode_tile(16, d, dv).block_n ? tuned : decode_tile(16, d, dv).block_n;
}
FLEXATTN_HD constexpr bool decode_has_m64(int d, int dv) { return decode_dmax(d, dv) <= 128; }
FLEXATTN_HD constexpr int decode_block_m(int packed_rows, int d, int dv) {
  return packed_rows <= 16 || !decode_has_m64(d, dv) ? 16 : 64;
}

FLEXATTN_HD constexpr int decode_threads(int block_m, int d, int dv) {
  return decode_tile(block_m, d, dv).warp_rows * decode_tile(block_m, d, dv).warp_cols * 32;
}

// Bytes: Q tile, then max(K/V ring, fp32 epilogue slabs), then the per-warp row max / sum, then the
// page-id slots (allocated for contiguous caches too: one compiled kernel serves both; 592 B for
// m16 at block_n 64, and the CTAs per SM do not change: 3 per H200 SM at D = 128 and 256, m16).
FLEXATTN_HD constexpr int decode_slab_stride(int dv) { return dv + 8; }
FLEXATTN_HD constexpr int decode_smem_q(int block_m, int d, int dv) { return 2 * block_m * (decode_dmax(d, dv) + 8); }
FLEXATTN_HD constexpr int decode_smem_kv(int block_m, int d, int dv, int stages = kDecodeStages) {
  const DecodeTile t = decode_tile(block_m, d, dv);
  const int ring = 2 * stages * t.block_n * ((d + 8) + (dv + 8));
  const int slab = 4 * t.warp_cols * block_m * decode_slab_stride(dv);
  return ring > slab ? ring : slab;
}
FLEXATTN_HD constexpr int decode_smem_ml(int block_m, int d, int dv) {
  return 2 * 4 * decode_tile(block_m, d, dv).warp_cols * block_m;
}
FLEXATTN_HD constexpr int decode_smem_pages(int block_m, int d, int dv, int stages = kDecodeStages) {
  // ids, unmapped bits (a slot per stage), then an 8-byte mbarrier per stage and warp column (the bulk ring's, one
  // per stage; the warp ring's, one per stage and warp; counted always, so the host's size never depends on how
  // the kernels were compiled)
  const DecodeTile t = decode_tile(block_m, d, dv);
  return 4 * stages * t.block_n + 8 * stages + 8 * stages * t.warp_cols;
}
FLEXATTN_HD constexpr int decode_smem(int block_m, int d, int dv, int stages = kDecodeStages) {
  return decode_smem_q(block_m, d, dv) + decode_smem_kv(block_m, d, dv, stages) + decode_smem_ml(block_m, d, dv) +
         decode_smem_pages(block_m, d, dv, stages);
}

FLEXATTN_HD constexpr long long decode_cdiv(long long a, long long b) { return (a + b - 1) / b; }

// Splits per row tile. With per_sm CTAs resident per SM there are sm_count * per_sm slots; the grid
// runs ctas * splits CTAs in waves of that size, and a last partial wave idles the rest of the GPU.
// Taken: the smallest split count whose wave efficiency (work / whole waves) is within 95% (tolerance;
// FLEXATTN_DECODE_WAVE) of the best reachable, with at least four kv tiles per split and at most kDecodeMaxSplits. Depends on shapes
// and the device only (never on device data), so the workspace size is known before the call and a
// captured graph stays valid while lengths change.
FLEXATTN_HD constexpr double decode_wave_efficiency(long long work, long long slots) {
  return (double)work / (double)(((work + slots - 1) / slots) * slots);
}
// The split counts searched: at least four kv tiles per split, at most max_splits (<= kDecodeMaxSplits).
FLEXATTN_HD constexpr long long decode_split_most(long long kv_capacity, int block_n, int max_splits) {
  long long most = decode_cdiv(decode_cdiv(kv_capacity > 0 ? kv_capacity : 1, block_n), 4);
  if (most > kDecodeMaxSplits) most = kDecodeMaxSplits;
  if (most > max_splits) most = max_splits > 0 ? max_splits : 1;
  return most;
}
FLEXATTN_HD constexpr double decode_best_efficiency(long long ctas, long long slots, long long most) {
  double best = 0;
  for (long long s = 1; s <= most; ++s) {
    const double e = decode_wave_efficiency(ctas * s, slots);
    best = e > best ? e : best;
  }
  return best;
}
FLEXATTN_HD constexpr long long decode_slots(int sm_count, int per_sm) {
  return (long long)(sm_count > 0 ? sm_count : 1) * (per_sm > 0 ? per_sm : 1);
}
// max_splits bounds the search (decode_plan_splits: the cluster limit).
FLEXATTN_HD constexpr int decode_num_splits(int sm_count, int per_sm, long long ctas, long long kv_capacity,
                                            int block_n, double tolerance = 0.95, int max_splits = kDecodeMaxSplits) {
  const long long slots = decode_slots(sm_count, per_sm);
  const long long c = ctas > 0 ? ctas : 1;
  const long long most = decode_split_most(kv_capacity, block_n, max_splits);
  const double best = decode_best_efficiency(c, slots, most);
  for (long long s = 1; s <= most; ++s)
    if (decode_wave_efficiency(c * s, slots) >= tolerance * best) return (int)s;
  return 1;
}

// Whether a call with `splits` kv splits can merge them inside a cluster: the path is on (FLEXATTN_DECODE_CLUSTER,
// sm_90+), 2..kDecodeClusterMax splits, and a cluster of that size fits the GPU. cluster_slots: null when the
// path is off; else [kDecodeClusterMax + 1] CTA slots of a grid of clusters of s CTAs (the driver's
// cuOccupancyMaxActiveClusters x s, which counts the GPCs' leftovers; 0 where such a cluster does not fit).
FLEXATTN_HD constexpr bool decode_cluster_fits(const long long* cluster_slots, int splits) {
  return cluster_slots != nullptr && splits >= 2 && splits <= kDecodeClusterMax && cluster_slots[splits] > 0;
}

struct DecodeSplitPlan {
  int splits;
  bool cluster;  // the splits merge inside a cluster (no workspace, no combine kernel)
};
// The split count of a call that asks for auto. Path off (cluster_slots null): decode_num_splits. On: the
// same rule over the counts the cluster path can run (1, and 2..8 where a cluster fits, each with its own
// slots: a wave of clusters can leave a GPC's last slots idle), taken when its wave efficiency is at least
// kDecodeClusterKeep of the best the workspace path reaches with any count; otherwise the workspace path's
// count. So a shape that needs many splits to fill the GPU (B = 1 x 128k: 8 kv heads x ~48) keeps them:
// capped at 8 it would run 64 CTAs on 396 slots. With every cluster fitting the plain slots, the capped
// count is the uncapped one whenever that is <= 8 (8x8k: 6, 64x4k: 3); the cap binds only where a cluster
// count loses less than 1 - kDecodeClusterKeep of wave efficiency (the combine it saves cost ~5 us of 79
// per call on the H200 at 8x8k).
constexpr double kDecodeClusterKeep = 0.85;
FLEXATTN_HD constexpr DecodeSplitPlan decode_plan_splits(const long long* cluster_slots, int sm_count, int per_sm,
                                                         long long ctas, long long kv_capacity, int block_n,
                                                         double tolerance = 0.95) {
  const int s = decode_num_splits(sm_count, per_sm, ctas, kv_capacity, block_n, tolerance);
  if (cluster_slots == nullptr) return DecodeSplitPlan{s, false};
  const long long slots = decode_slots(sm_count, per_sm), c = ctas > 0 ? ctas : 1;
  const long long most = decode_split_most(kv_capacity, block_n, kDecodeClusterMax);
  double eff[kDecodeClusterMax + 1] = {};
  double best_c = 0;
  for (long long t = 1; t <= most; ++t) {
    eff[t] = t == 1 ? decode_wave_efficiency(c, slots)
                    : decode_cluster_fits(cluster_slots, (int)t) ? decode_wave_efficiency(c * t, cluster_slots[t]) : 0.0;
    best_c = eff[t] > best_c ? eff[t] : best_c;
  }
  int sc = 1;
  for (long long t = most; t >= 1; --t)
    if (eff[t] > 0 && eff[t] >= tolerance * best_c) sc = (int)t;  // the smallest such count
  const double best = decode_best_efficiency(c, slots, decode_split_most(kv_capacity, block_n, kDecodeMaxSplits));
  if (eff[sc] >= kDecodeClusterKeep * best) return DecodeSplitPlan{sc, sc >= 2};
  return DecodeSplitPlan{s, false};
}

// What a call launches: the split kernel, with a cluster of (1, 1, cluster_z) over the grid's z (the
// splits) when cluster_z > 0; then the combine kernel (when combine), as a programmatic dependent launch
// when combine_pdl. cluster: the call merges its splits in a cluster (DecodeSplitPlan, decode_cluster_fits).
struct DecodeLaunchPlan {
  unsigned cluster_z;
  bool combine, combine_pdl;
};
FLEXATTN_HD constexpr DecodeLaunchPlan decode_launch_plan(bool cluster, bool pdl, int splits) {
  if (cluster && splits >= 2 && splits <= kDecodeClusterMax) return DecodeLaunchPlan{(unsigned)splits, false, false};
  return DecodeLaunchPlan{0u, splits > 1, splits > 1 && pdl};
}

struct DecodeLaunch {
  unsigned grid_x, grid_y, grid_z;
  unsigned block;
  unsigned smem;
};

// Grid: x = row tile of the packed rows, y = batch x head group, z = kv split.
FLEXATTN_HD constexpr DecodeLaunch decode_launch(int d, int dv, int B, int Hq, int L, int pack_heads, int splits,
                                                 int stages = kDecodeStages) {
  const int bm = decode_block_m(pack_heads * L, d, dv);
  return DecodeLaunch{(unsigned)decode_cdiv((long long)pack_heads * L, bm), (unsigned)(B * (Hq / pack_heads)),
                      (unsigned)splits, (unsigned)decode_threads(bm, d, dv), (unsigned)decode_smem(bm, d, dv, stages)};
}
FLEXATTN_HD constexpr DecodeLaunch decode_combine_launch(int B, int Hq, int L) {
  return DecodeLaunch{(unsigned)decode_cdiv((long long)B * Hq * L, kDecodeCombineWarps), 1u, 1u,
                      (unsigned)(kDecodeCombineWarps * 32), 0u};
}

// fp32 workspace: partial outputs [splits, rows, Dv], then (max, sum) pairs [splits, rows, 2]; 0 when
// one split writes the output directly, or when the splits merge inside a cluster (cluster: as
// decode_launch_plan's).
FLEXATTN_HD constexpr long long decode_workspace_floats(long long rows, int dv, int splits, bool cluster = false) {
  return splits <= 1 || decode_launch_plan(cluster, false, splits).cluster_z > 0 ? 0
                                                                                 : (long long)splits * rows * (dv + 2);
}

}  // namespace flexattn::kern
