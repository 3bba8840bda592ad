#pragma once
// Tile table, shared-memory layout and launch geometry of the sm90 (Hopper, sm_90a) backward main
// kernel (dK / dV, atomic dQ). Compiles as host C++ (the runtime sizes and launches from it) and as
// device code. The other backward entries (delta preprocess, deterministic dQ pass, dQ convert) are the
// sm80 family's, compiled into the same module.
//
// Structure (hopper.md section 3, "SdP_swapAB"): one CTA per (128-row kv tile, kv head, kv batch),
// 384 threads = a producer warpgroup (warp 0 alive: lane 0 issues TMA, all 32 lanes copy lse / delta)
// + 2 consumer warpgroups that own 64 kv rows each, so S^T = K Q^T and dP^T = V dO^T are m64 wgmmas
// whose accumulators (rows = kv) are already the register A operand of dV += P^T dO.
//
// NOTHING HERE IS MEASURED (written without GPU time). Reasoning per choice:
//  block_m = 64 query rows per pipeline stage at D, Dv <= 128 (FA3 uses 64 x 128 for hdim 128 causal).
//    Accumulators per consumer thread: S^T 32 + dP^T 32 + dV Dv/2 + dK D/2 (+ dQ D/2 while S^T / dP^T are
//    dead) = 192 at D = Dv = 128, inside the 232 of setmaxnreg. 64 divides torch's 128 mask block.
//  dQ per warpgroup is the partial product over its *own* 64 kv rows (m64 x D x k64), so the two
//    consumer warpgroups never wait for each other (no cross-warpgroup barrier); the price is two fp32
//    reductions into dq_accum per (query row, kv tile) instead of one.
//    FLEXATTN_SM90_BWD_DQ_BULK (template argument kDqBulk; the default since it measured +20-34 % on the
//    H200, session 4): FA3's dQ path instead. Consumer
//    warpgroup 0 stores its partial into a shared fp32 dQ tile, warpgroup 1 adds its own there, and
//    warp 1 of the producer warpgroup pushes the summed tile with cp.reduce.async.bulk (one fp32 reduction
//    per (query row, kv tile), no RED issue slots in the consumers). Double-buffered: at D = Dv = 128
//    the request grows from 146 to 214 KiB (2 x 34 KiB), inside the 227 KiB.
//  stages = 2 (Q, dO, lse, delta per stage). K and V stay resident for the CTA's life.
//  D = Dv = 256 takes the wide kernel (bwd_consumer_wide_sm90.cuh, "Wide head dims" below): dK + dV of a
//    128-row kv tile would be 256 registers per thread. Other head dims above 128 (192) run on the sm80 family.
#include "common/params.h"
#include "sm90/head_groups_sm90.h"
#include "sm90/tile_config_sm90.h"

namespace flexattn::kern {

constexpr int kSm90BwdBlockM = 64;   // query rows per pipeline stage
constexpr int kSm90BwdBlockN = 128;  // kv rows per CTA (2 consumer warpgroups x 64)
// The one CTA that builds the deferred launch order (FLEXATTN_SM90_BWD_CTA_ORDER, sm90/bwd_cta_order_sm90.cuh).
constexpr int kSm90BwdOrderThreads = 1024;
constexpr int kSm90BwdStages = 2;
// Register split (setmaxnreg). The forward's 24 / 240 spilled 8-16 bytes in the producer here (ptxas
// 13.0, every masked corpus variant): all 32 lanes walk the transposed lists (BwdTileIter) and copy
// lse / delta. 40 / 232 compiles every corpus variant clean; 128 * 40 + 256 * 232 = 64,512.
constexpr int kSm90BwdProducerRegs = 40;
constexpr int kSm90BwdConsumerRegs = 232;
// The backward v2 with the bulk dQ path takes FA3's 24 / 240: there the producer walk stays on the
// uniform datapath (role split by a shuffled warp index, attn_bwd_sm90.cuh) and needs R0-R20 (ptxas
// 13.0), and the 8 more consumer registers let the v2 compute P while dP^T still runs (at 232 ptxas
// serialized every wgmma, C7512). 24 * 128 + 240 * 256 = 64,512 = the 168 * 384 of the launch.
FLEXATTN_HD constexpr int sm90_bwd_producer_regs(bool dq_bulk, bool v2) {
  return dq_bulk && v2 ? 24 : kSm90BwdProducerRegs;
}
FLEXATTN_HD constexpr int sm90_bwd_consumer_regs(bool dq_bulk, bool v2) {
  return dq_bulk && v2 ? 240 : kSm90BwdConsumerRegs;
}

// Wide head dims (D = Dv = 256): the wide consumer (bwd_consumer_wide_sm90.cuh). One CTA per 64-row kv tile; both
// consumer warpgroups hold all 64 kv rows and split every GEMM by columns: S^T and dP^T by query columns (m64 n32
// k256, 16 + 16 accumulators), dK, dV and dQ by head-dim columns (m64 n128 k64, 64 registers each, 192 in all), so
// P^T and dS^T go through shared memory (both halves feed both warpgroups). Q and dO have one stage: the layout
// is 32 KiB each for K, V, Q, dO, 2 x 2 x 8 KiB of P^T / dS^T (double-buffered by query tile: one 256-thread
// barrier per tile) and the 64 KiB fp32 dQ tile of the TMA reduce path (v3), 225 KiB of the 227. The tile shape
// (64 x 64, one stage, dQ by a bulk TMA reduction) is the one FlashAttention's Hopper backward takes at hdim
// 256. NOT MEASURED yet: written without GPU time (session 12).
FLEXATTN_HD constexpr bool sm90_bwd_wide(int d, int dv) { return d == 256 && dv == 256; }
FLEXATTN_HD constexpr int sm90_bwd_block_n(int d, int dv) { return sm90_bwd_wide(d, dv) ? 64 : kSm90BwdBlockN; }
FLEXATTN_HD constexpr int sm90_bwd_stages(int d, int dv) { return sm90_bwd_wide(d, dv) ? 1 : kSm90BwdStages; }

// Head dims the backward main kernel compiles for.
FLEXATTN_HD constexpr bool sm90_bwd_head_dims_ok(int d, int dv) {
  return ((d == 64 || d == 128) && (dv == 64 || dv == 128)) || sm90_bwd_wide(d, dv);
}

// Whether the first (non-v2, non-wide) backward kernel stores dK / dV through the TMA-store epilogue when compiled with
// it: not at D + Dv >= 256 (there the v2 is the default; with the epilogue's second path that kernel's softcap + causal
// spilled 20-128 bytes, ptxas 13.0). The source generator leaves the define out there, so a set's tma_store says what
// runs (the padded head dims rely on it).
FLEXATTN_HD constexpr bool sm90_bwd_first_kernel_tma_store_ok(int d, int dv) { return d + dv < 256; }

// The compiled head dim a call's head dim runs on when padded (FLEXATTN_SM90_PAD_HEAD_DIM, as the forward's
// sm90_padded_head_dim): itself when compiled, multiples of 16 up to 128 on 128, above on 256 (the wide kernel takes
// D = Dv = 256 only); 0 otherwise. Q, K, V and dO are read through TMA maps of the real dims, whose boxes read zeros
// past them; dK / dV leave through TMA stores that write nothing past them; dQ goes through the accumulator at the
// padded dim, and the dQ convert writes the real columns.
FLEXATTN_HD constexpr int sm90_bwd_padded_head_dim(int d) {
  if (d == 64 || d == 128 || d == 256) return d;
  if (d <= 64 || d > 256 || d % 16 != 0) return 0;
  return d < 128 ? 128 : 256;
}

// Head dims of the backward v2 main kernel (FLEXATTN_SM90_BWD_V2): its dQ GEMM gives each consumer
// warpgroup one 64-column slab of D (n64, k = all 128 kv rows), so D = 128; Dv 64 or 128. Other head
// dims run the default kernel even with the switch.
FLEXATTN_HD constexpr bool sm90_bwd_v2_head_dims_ok(int d, int dv) { return d == 128 && (dv == 64 || dv == 128); }

// The v3 dQ slabs ([64 rows][32 fp32], 128B swizzle; DqSlots in bwd_consumer_sm90.cuh): the 16-byte chunk of a row
// (row % 8 == g) holding the pair at columns 8 block + 2t, + 1 of the slab's four 8-column blocks. With the swapped
// order (FLEXATTN_SM90_BWD_DQ_SWAP) the lane of odd g stores block i ^ 2 at step i, which chunk(i, t, xor(g))
// places: each half-warp's 8-byte access then covers 32 distinct banks (tests: Sm90BwdHost.DqV3StoreOrder...).
FLEXATTN_HD constexpr int sm90_dq_v3_chunk(int block, int t, int g) { return (2 * (block & 3) + (t >> 1)) ^ g; }
FLEXATTN_HD constexpr int sm90_dq_v3_step_block(int i, int g, bool swap) { return swap && (g & 1) ? i ^ 2 : i; }
FLEXATTN_HD constexpr int sm90_dq_v3_chunk_xor(int g, bool swap) { return swap && (g & 1) ? g ^ 4 : g; }

// Shared-memory layout (byte offsets from a 1024-aligned base; every 128B-swizzled tile 1024-aligned).
// A tile of R rows and C columns is C/64 slabs of [R][64] (128-byte rows, 16-byte chunks XOR-swizzled
// by row % 8: what a TMA box (64, R) with SWIZZLE_128B writes). Every TMA box here has 64 rows, so K and
// V are stored per consumer half: [half][C/64][64][64].
//   k, v      : the CTA's kv tile, 2 halves of 64 x D / 64 x Dv.
//   q, dout   : `stages` tiles of 64 x D / 64 x Dv.
//   ds        : per consumer warpgroup one [64 kv][64 q] tile of dS^T (read K-major by dK += dS^T Q and
//               MN-major by dQ = dS K).
//   lse, delta: per stage 64 floats (lse already in log2 units, +inf past L; delta 0 past L).
//   bars      : kv (K + V landed), then per stage full, empty (8 bytes each).
//   info      : per stage 4 ints: query tile start (-1 = no more tiles), query head, batch, full flag.
// With the bulk dQ path (FLEXATTN_SM90_BWD_DQ_BULK, dq_bulk = true) the same offsets, then after info
// (128-aligned):
//   dq        : kSm90BwdDqBuffers fp32 dQ tiles of 64 query rows x D, row-major as in dq_accum but each
//               row padded by kSm90BwdDqRowPad bytes (dq_row = 4 D + 32 bytes, dq_buf = 64 dq_row): the
//               accumulator's v2 stores of a half-warp (rows g, g + 1, .., cols 8i + 2t) then cover all
//               32 banks once; one bulk reduce per row (rows < L only) adds it into dq_accum.
//   dq_bars   : per dQ buffer full (128 arrivals: consumer warpgroup 1), then per buffer empty (1).
//   dq_info   : per dQ buffer 2 ints: query tile start (-1 = no more tiles), b * Hq + h.
// The default layout (dq_bulk = false) is exactly the one before the bulk path existed (dq fields 0).
constexpr int kSm90BwdDqBuffers = 2;
constexpr int kSm90BwdDqRowPad = 32;
// dQ buffers of the bulk path: two, one per stage. The v2 layout has two with the TMA reductions (v3: unpadded tiles,
// placed right after the dS^T tiles so no alignment pad is lost: 226 KiB at D = 128), so the consumers run a tile
// ahead of a writer that waits for its turn in deterministic mode (session 19: with one buffer the consumers' dq_empty
// wait was 6.5 % of the samples there; session 20 with two: deterministic causal D=128 +22.7 -> +17.3 %, the default
// mode unchanged); one with the padded per-row tiles (two would need 228 KiB at D = 128).
FLEXATTN_HD constexpr int sm90_bwd_dq_buffers(bool v2, bool dq_tma = false) {
  return v2 ? (dq_tma ? 2 : 1) : kSm90BwdDqBuffers;
}
// The rank ring of the ordered dQ reductions (deterministic mode; kernels/sm90/bwd_dq_rank_sm90.cuh): slots of 16 bytes
// (query tile start, b * Hq + h, rank), then a full and an empty barrier per slot. In every layout with the TMA dQ path
// and two dQ buffers (128 bytes; the D = 128 v2 layout keeps 776 bytes under the opt-in limit).
constexpr int kSm90BwdRankSlots = 4;
constexpr int kSm90BwdRankRingBytes = kSm90BwdRankSlots * (16 + 2 * 8);
FLEXATTN_HD constexpr bool sm90_bwd_has_rank_ring(bool dq_bulk, bool v2, bool dq_tma) {
  return dq_bulk && dq_tma && sm90_bwd_dq_buffers(v2, dq_tma) == 2;
}

// The first kernel's (not v2, not wide) buffer-gradient scratch (kernels/sm90/bwd_buffer_grad_sm90.cuh, bg_wg_*): per
// consumer warpgroup and stage, each warp's 80 diagonal sums of a query tile and the tile's coordinates (16 bytes),
// so that a warpgroup adds 127 diagonals per tile where its four warps added 4 x 79. Every first-kernel layout has it
// (5,184 bytes; those kernels run one CTA per SM by their registers, and the D = 128 bulk layout keeps 8 KiB under
// the limit); the v2 layout (776 bytes left at D = 128) has none.
constexpr int kSm90BwdBgWarpSlots = 80;  // kWgDiagSlots (common/diag_reduce.cuh)
constexpr int kSm90BwdBgBufBytes = 4 * kSm90BwdBgWarpSlots * 4 + 16;
FLEXATTN_HD constexpr bool sm90_bwd_has_bg_scratch(int d, int dv, bool v2) { return !v2 && !sm90_bwd_wide(d, dv); }

struct Sm90BwdSmem {
  int k_half, k, v_half, v, q_stage, q, do_stage, dout, ds_tile, ds, lse, delta, bars, info, total;
  int dq_row, dq_buf, dq, dq_bars, dq_info;
  int p;  // the wide kernel's P^T tiles (0 elsewhere: P^T stays in registers)
  int dq_rank;  // the rank ring (sm90_bwd_has_rank_ring; 0 elsewhere)
  int bg;       // the buffer-gradient diagonal sums (sm90_bwd_has_bg_scratch; 0 elsewhere)
};

// The wide kernel's layout (sm90_bwd_wide; every tile 1024-aligned, each a multiple of 8 KiB):
//   k, v: the 64-row kv tile (D / 64 slabs each); q, dout: one stage; ds, p: two [64 kv][64 q] tiles each
//   (query tile n uses tile n % 2); dq: the v3 dQ tile, D / 32 swizzled [64][32] fp32 slabs; then lse, delta,
//   bars (kv, full, empty), info, dq_bars (full, empty), dq_info.
FLEXATTN_HD constexpr Sm90BwdSmem sm90_bwd_wide_smem_layout(int d, int dv) {
  Sm90BwdSmem s{};
  s.k_half = 64 * d * 2;
  s.k = 0;
  s.v_half = 64 * dv * 2;
  s.v = s.k + s.k_half;
  s.q_stage = kSm90BwdBlockM * d * 2;
  s.q = s.v + s.v_half;
  s.do_stage = kSm90BwdBlockM * dv * 2;
  s.dout = s.q + s.q_stage;
  s.ds_tile = 64 * kSm90BwdBlockM * 2;
  s.ds = s.dout + s.do_stage;
  s.p = s.ds + 2 * s.ds_tile;
  s.dq_row = 128;
  s.dq_buf = kSm90BwdBlockM * 4 * d;
  s.dq = s.p + 2 * s.ds_tile;
  s.lse = s.dq + s.dq_buf;
  s.delta = s.lse + kSm90BwdBlockM * 4;
  s.bars = s.delta + kSm90BwdBlockM * 4;
  s.info = s.bars + 8 * 3;
  s.dq_bars = s.info + 16;
  s.dq_info = s.dq_bars + 8 * 2;
  s.total = s.dq_info + 8;
  return s;
}

// Backward v2 (FLEXATTN_SM90_BWD_V2, v2 = true): the dS^T tiles are double-buffered (one set per stage,
// [stage][consumer warpgroup][64 kv][64 q]) because both warpgroups' dQ GEMMs read both tiles: a tile of
// query tile n may be overwritten at tile n + 2 only, after one 256-thread barrier per tile
// (bwd_consumer_v2_sm90.cuh). Every region after ds moves by 16 KiB. With dq_bulk as well, one dQ buffer
// (sm90_bwd_dq_buffers) of the complete CTA partial (each warpgroup fills 64 of its columns).
// Backward v3 (FLEXATTN_SM90_BWD_V3, dq_tma = true, only with dq_bulk; with v2 at D = 128, with the first
// kernel's two dQ buffers at D = 64: 2 x 16 KiB instead of 2 x 18 KiB): each dQ buffer is D / 32
// slabs of [64 rows][32 fp32] (128-byte rows, 16-byte chunks XOR-swizzled by row % 8: the box (32, 64, 1)
// of the 128B-swizzled dq_map), 1024-aligned, no row padding; the writer adds it with D / 32 TMA tensor
// reductions instead of one bulk reduction per row (session 5 profile: the per-row loop kept the writer
// warp busy all the time and the consumers waited on dq_empty for ~30 % of their samples).
FLEXATTN_HD constexpr Sm90BwdSmem sm90_bwd_smem_layout(int d, int dv, bool dq_bulk = false, bool v2 = false,
                                                       bool dq_tma = false) {
  if (sm90_bwd_wide(d, dv)) return sm90_bwd_wide_smem_layout(d, dv);  // one dQ path (bulk, v3): no flags
  Sm90BwdSmem s{};
  s.k_half = 64 * d * 2;
  s.k = 0;
  s.v_half = 64 * dv * 2;
  s.v = s.k + 2 * s.k_half;
  s.q_stage = kSm90BwdBlockM * d * 2;
  s.q = s.v + 2 * s.v_half;
  s.do_stage = kSm90BwdBlockM * dv * 2;
  s.dout = s.q + kSm90BwdStages * s.q_stage;
  s.ds_tile = 64 * kSm90BwdBlockM * 2;
  s.ds = s.dout + kSm90BwdStages * s.do_stage;
  s.lse = s.ds + (v2 ? kSm90BwdStages : 1) * kSm90ConsumerWarpgroups * s.ds_tile;
  const int nbuf = sm90_bwd_dq_buffers(v2, dq_tma);
  if (dq_bulk) {
    s.dq_row = dq_tma ? 128 : 4 * d + kSm90BwdDqRowPad;
    s.dq_buf = dq_tma ? kSm90BwdBlockM * 4 * d : kSm90BwdBlockM * s.dq_row;
  }
  // v2 with v3's tiles: the dQ buffers right after the dS^T tiles (1024-aligned there), the small regions after them.
  const bool dq_first = dq_bulk && v2 && dq_tma;
  if (dq_first) {
    s.dq = s.lse;
    s.lse = s.dq + nbuf * s.dq_buf;
  }
  s.delta = s.lse + kSm90BwdStages * kSm90BwdBlockM * 4;
  s.bars = s.delta + kSm90BwdStages * kSm90BwdBlockM * 4;
  s.info = s.bars + 8 * (1 + 2 * kSm90BwdStages);
  s.total = s.info + 16 * kSm90BwdStages;
  if (dq_bulk) {
    if (!dq_first) s.dq = dq_tma ? (s.total + 1023) / 1024 * 1024 : (s.total + 127) / 128 * 128;
    s.dq_bars = dq_first ? s.total : s.dq + nbuf * s.dq_buf;
    s.dq_info = s.dq_bars + 8 * 2 * nbuf;
    s.total = s.dq_info + 8 * nbuf;
  }
  if (sm90_bwd_has_rank_ring(dq_bulk, v2, dq_tma)) {
    s.dq_rank = s.total;
    s.total += kSm90BwdRankRingBytes;
  }
  if (sm90_bwd_has_bg_scratch(d, dv, v2)) {
    s.bg = (s.total + 15) / 16 * 16;
    s.total = s.bg + kSm90ConsumerWarpgroups * kSm90BwdStages * kSm90BwdBgBufBytes;
  }
  return s;
}

// Dynamic shared memory to request: the layout plus slack to round the base up to 1024 bytes.
FLEXATTN_HD constexpr int sm90_bwd_smem(int d, int dv, bool dq_bulk = false, bool v2 = false, bool dq_tma = false) {
  return sm90_bwd_smem_layout(d, dv, dq_bulk, v2, dq_tma).total + 1024;
}

// Grid: x = kv tile, y = kv head, z = kv batch (Bkv; with Bkv == 1 one CTA walks every query batch).
FLEXATTN_HD constexpr Sm90Launch sm90_bwd_launch(int d, int dv, int Bkv, int Hkv, int S, bool dq_bulk = false,
                                                 bool v2 = false, bool dq_tma = false) {
  const int bn = sm90_bwd_block_n(d, dv);
  return Sm90Launch{(unsigned)((S + bn - 1) / bn), (unsigned)Hkv, (unsigned)Bkv,
                    (unsigned)kSm90Threads, (unsigned)sm90_bwd_smem(d, dv, dq_bulk, v2, dq_tma)};
}

// Persistent backward (FLEXATTN_SM90_BWD_PERSISTENT, template argument kPersistent of attn_bwd_sm90;
// docs/kernels_sm90.md, "Persistent backward"): grid = min(CTAs, work tiles), each CTA loops over work
// tiles (128-row kv tile, kv head, kv batch). Its two extra shared words sit after the layout's end
// (kSmem.total, a multiple of 8), so every other offset is the default layout's: the kv_empty barrier
// (8 bytes) and the tile's info slot (kv0 or -1 = no more tiles, kv head, kv batch, next bar_kv parity;
// 16 bytes).
constexpr int kSm90BwdPersistentSmem = 32;

// Work tiles of the backward: one per (kv tile, kv head, kv batch).
FLEXATTN_HD constexpr int sm90_bwd_work_tiles(int Bkv, int Hkv, int S) {
  return (S + kSm90BwdBlockN - 1) / kSm90BwdBlockN * Hkv * Bkv;
}

struct Sm90BwdWorkTile {
  int kv0, hk, bz;  // first kv row, kv head, kv batch
};

// Launch order of the non-persistent backward (p.bwd_head_group = G): CTA `linear` (blockIdx.x + gridDim.x *
// (blockIdx.y + gridDim.y * blockIdx.z), the order the hardware dispatches in) runs kv rank j of pair hbi =
// kv head + Hkv * kv batch, where the pairs form groups of G (the hb % G left over first) and inside a group the
// ranks go first: for j, for the group's pairs. The kernel takes kv tile |bwd_kv_flip - j|. G = 1 is the grid's
// own order (all ranks of a pair, then the next pair). Why: one CTA per SM, 2048 CTAs of unequal length
// (causal: kv tile j walks 64 - j query tiles at S = 8192) dispatched pair after pair leave a tail; ranks first
// across a group whose Q, dO, dQ accumulator and K / V fit in about half the L2 keep the longest CTAs at the
// front without spreading the working set over every head (greedy schedule model, tests/compile/sm90:
// causal B=2 H=16 S=8192 makespan 549 -> 520 kv-tile times at G = 2, bound 520; S=4096 154 -> 136 at G = 4).
// In deterministic mode a CTA still only waits for CTAs with lower linear index: the same pair's lower ranks
// (higher kv tiles, bwd_dq_order_sm90.h) come earlier in its group.
struct Sm90BwdGridTile {
  int rank, hk, bz;
};
// The group size sm90_bwd_grid_tile takes for p.bwd_head_group = group: 1 for 0 or 1, at most every pair.
FLEXATTN_HD constexpr int sm90_bwd_group_size(int group, int hb) { return group > 1 ? (group < hb ? group : hb) : 1; }
FLEXATTN_HD constexpr Sm90BwdGridTile sm90_bwd_grid_tile(int linear, int n_kv, int Hkv, int Bkv, int group) {
  const int hb = Hkv * Bkv;
  const HeadGroupSpan s = head_group_span(linear, hb, sm90_bwd_group_size(group, hb), n_kv);
  const int rank = s.within / s.size, hbi = s.u0 + (s.within - rank * s.size);
  return Sm90BwdGridTile{rank, hbi % Hkv, hbi / Hkv};
}

// Work tile t of the persistent backward (n_kv kv tiles per pair, p.bwd_head_group = G): sm90_bwd_grid_tile's order
// with kv tile = rank, ascending: inside a group of G (kv head, kv batch) pairs the kv tiles go first (for each kv
// tile, the group's pairs). Ascending kv is longest first for causal-like masks (kv tile j is attended by the query
// tiles at or after it) and equal length for dense, sliding-window and document masks; with the tile queue a CTA
// that finishes early takes the next tile (greedy), so the short tiles of the tail fill the gaps. G = Hkv * Bkv is
// one group (kv tiles over every pair: the order until session 28, whose working set is every head's Q, dO and dQ
// accumulator at once: the persistent kernel measured 20 % slower than the grouped non-persistent one on dense
// D=128, H100); the host takes the L2-sized group (sm90_bwd_head_group).
FLEXATTN_HD constexpr Sm90BwdWorkTile sm90_bwd_work_tile(int t, int n_kv, int Hkv, int Bkv, int group) {
  const Sm90BwdGridTile g = sm90_bwd_grid_tile(t, n_kv, Hkv, Bkv, group);
  return Sm90BwdWorkTile{g.rank * kSm90BwdBlockN, g.hk, g.bz};
}

// The group size for sm90_bwd_grid_tile (l2_group_size): a (kv head, kv batch) pair's working set is the Q and dO
// of the Hq / Hkv query heads and of the B / Bkv batches a broadcast K / V serves, their fp32 dQ accumulator, and
// its K / V.
FLEXATTN_HD constexpr int sm90_bwd_head_group(int B, int Hq, int Hkv, int Bkv, int L, int S, int d, int dv) {
  const long long rows = (long long)(Hq / (Hkv > 0 ? Hkv : 1)) * (B / (Bkv > 0 ? Bkv : 1)) * L;
  return l2_group_size(rows * ((d + dv) * 2ll + d * 4ll) + (long long)S * (d + dv) * 2, Hkv * Bkv);
}

// Grid of the persistent backward: x = min(ctas, work tiles) (at least 1; the tile queue needs every
// CTA's first tile, blockIdx.x, to exist), and the layout plus the two persistent words.
FLEXATTN_HD constexpr Sm90Launch sm90_bwd_persistent_launch(int d, int dv, int Bkv, int Hkv, int S, int ctas,
                                                            bool dq_bulk = false, bool v2 = false,
                                                            bool dq_tma = false) {
  const int tiles = sm90_bwd_work_tiles(Bkv, Hkv, S);
  const int x = ctas < tiles ? ctas : tiles;
  return Sm90Launch{(unsigned)(x > 1 ? x : 1), 1u, 1u, (unsigned)kSm90Threads,
                    (unsigned)(sm90_bwd_smem(d, dv, dq_bulk, v2, dq_tma) + kSm90BwdPersistentSmem)};
}

// Mask tiles the backward accepts: a kv tile (block_n rows: sm90_bwd_block_n) must sit inside one mask column,
// and the query tiles of 64 rows inside one mask row (the no-mask sentinel 1 << 30 qualifies).
FLEXATTN_HD constexpr bool sm90_bwd_mask_blocks_ok(int q_block, int kv_block, int block_n = kSm90BwdBlockN) {
  return q_block > 0 && kv_block > 0 && q_block % kSm90BwdBlockM == 0 && kv_block % block_n == 0;
}

static_assert(kSm90BwdProducerRegs * 128 + kSm90BwdConsumerRegs * 256 <= 65536, "register file");
static_assert(sm90_bwd_producer_regs(true, true) * 128 + sm90_bwd_consumer_regs(true, true) * 256 <= 168 * 384,
              "v2 + bulk register split inside the launch allocation");
static_assert(kSm90BwdBlockN == 64 * kSm90ConsumerWarpgroups, "one 64-row kv half per consumer warpgroup");
static_assert(sm90_bwd_smem(128, 128) <= kSm90SmemLimit, "smem d128");
static_assert(sm90_bwd_smem(64, 128) <= kSm90SmemLimit, "smem d64/dv128");
static_assert(sm90_bwd_smem(128, 128, true) <= kSm90SmemLimit, "smem d128 with the double-buffered dQ tile");
static_assert(sm90_bwd_smem(128, 64, true) <= kSm90SmemLimit, "smem d128/dv64 with the dQ tile");
static_assert(sm90_bwd_smem_layout(64, 64, true).dq % 128 == 0 && sm90_bwd_smem_layout(128, 128, true).dq_row % 16 == 0 &&
                  sm90_bwd_smem_layout(64, 64, true).dq_row % 16 == 0,
              "bulk reduce sources are 16-byte aligned");
static_assert(sm90_bwd_smem(128, 128, false, true) <= kSm90SmemLimit, "smem d128 with the v2 dS^T double buffer");
static_assert(sm90_bwd_smem(128, 128, true, true) <= kSm90SmemLimit, "smem d128, v2 with the bulk dQ tile");
static_assert(sm90_bwd_smem_layout(128, 128, false, true).ds % 1024 == 0 &&
                  sm90_bwd_smem_layout(128, 64, false, true).ds % 1024 == 0,
              "v2 dS^T tiles stay 1024-aligned");
static_assert(sm90_bwd_smem(128, 128, true, true, true) + kSm90BwdPersistentSmem <= kSm90SmemLimit,
              "smem d128, v3: two dQ buffers next to the double-buffered dS^T tiles");
static_assert(sm90_bwd_smem_layout(128, 128, true, true, true).dq % 1024 == 0 &&
                  sm90_bwd_smem_layout(128, 64, true, true, true).dq % 1024 == 0,
              "v3 dQ slabs are 1024-aligned (128B swizzle atoms of the dq_map box)");
static_assert(sm90_bwd_smem(64, 64, true, false, true) <= sm90_bwd_smem(64, 64, true) &&
                  sm90_bwd_smem(64, 128, true, false, true) <= sm90_bwd_smem(64, 128, true) &&
                  sm90_bwd_smem(128, 128, true, false, true) <= sm90_bwd_smem(128, 128, true),
              "first kernel, v3: the unpadded swizzled dQ buffers are no larger than the padded ones");
static_assert(sm90_bwd_smem_layout(64, 64, true, false, true).dq % 1024 == 0 &&
                  sm90_bwd_smem_layout(64, 128, true, false, true).dq % 1024 == 0 &&
                  sm90_bwd_smem_layout(64, 64, true, false, true).dq_buf % 1024 == 0,
              "first kernel, v3: both dQ buffers' slabs are 1024-aligned");
static_assert(sm90_bwd_smem(128, 128, true, true) + kSm90BwdPersistentSmem <= kSm90SmemLimit &&
                  sm90_bwd_smem(64, 128, true) + kSm90BwdPersistentSmem <= kSm90SmemLimit &&
                  sm90_bwd_smem(128, 128, true) + kSm90BwdPersistentSmem <= kSm90SmemLimit &&
                  sm90_bwd_smem(128, 128, false, true) + kSm90BwdPersistentSmem <= kSm90SmemLimit,
              "the persistent kernel's two words fit next to every layout");
static_assert(sm90_bwd_smem_layout(128, 128, true, true, true).total % 8 == 0 &&
                  sm90_bwd_smem_layout(64, 64, true, false, true).total % 8 == 0 &&
                  sm90_bwd_smem_layout(64, 64).total % 8 == 0 && sm90_bwd_smem_layout(128, 64, false, true).total % 8 == 0,
              "the persistent kv_empty barrier after the layout is 8-byte aligned");
static_assert(sm90_bwd_smem_layout(128, 128, true, true, true).dq_rank % 8 == 0 &&
                  sm90_bwd_smem_layout(64, 64, true, false, true).dq_rank % 8 == 0 &&
                  sm90_bwd_smem_layout(128, 128, true, true, true).dq_rank > 0 &&
                  sm90_bwd_smem_layout(64, 64, true, false, true).dq_rank > 0,
              "the rank ring's barriers are 8-byte aligned");
static_assert(sm90_bwd_smem_layout(128, 128).q % 1024 == 0 && sm90_bwd_smem_layout(64, 64).ds % 1024 == 0,
              "tiles stay 1024-aligned");
static_assert(sm90_bwd_smem(256, 256) <= kSm90SmemLimit && sm90_bwd_smem(256, 256, true, false, true) == sm90_bwd_smem(256, 256),
              "smem d256 (the wide kernel, one layout whatever the dQ flags)");
static_assert(sm90_bwd_wide_smem_layout(256, 256).q % 1024 == 0 && sm90_bwd_wide_smem_layout(256, 256).dout % 1024 == 0 &&
                  sm90_bwd_wide_smem_layout(256, 256).ds % 1024 == 0 && sm90_bwd_wide_smem_layout(256, 256).p % 1024 == 0 &&
                  sm90_bwd_wide_smem_layout(256, 256).dq % 1024 == 0 && sm90_bwd_wide_smem_layout(256, 256).bars % 8 == 0,
              "wide kernel: every tile 1024-aligned, barriers 8-aligned");

}  // namespace flexattn::kern
