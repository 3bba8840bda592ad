#pragma once
// The one table of compute tiles for the sm80 family (mma.sync m16n8k16; runs on sm_80..sm_90), and the
// launch geometry derived from it. Compiles as host C++ (the runtime launches from it) and as device
// code (the kernels take their template defaults from it).
//
// Buckets are by max(D, Dv) (a head dim must be a multiple of 16, at most 256). Budget rules the table
// follows: no register spills (ptxas -v, every lab variant, sm_80 and sm_90a; the one exception is the
// dQ pass at D=128/Dv=64, 12 B) and shared memory under 163 KiB (A100 opt-in limit), so the same table
// serves sm_80..sm_90.
//
// Measured with these rows (H200, bf16, B=2 H=16 L=S=8192, identity, no mask; bench/lab/sm80; full
// table in docs/kernels_sm80.md): fwd D64 187, D128 228, D256 226 TFLOP/s; bwd (atomic dQ / deterministic)
// D64 116 / 114, D128 134 / 150, D256 79 / 113. The rows were picked as the largest spill-free tiles
// (ptxas -v, both archs); they are not yet tuned by timing.
#include "common/params.h"

namespace flexattn::kern {

struct Sm80Tile {
  int block_m;  // query rows per tile
  int block_n;  // kv rows per tile
  int warps;
  int stages;  // 2: the next tile's loads overlap this tile's math; 1: load, then compute
};

FLEXATTN_HD constexpr int sm80_dmax(int d, int dv) { return d > dv ? d : dv; }

// Forward: each warp owns block_m / warps query rows across the whole kv tile, so P stays in registers.
// Candidates were compiled (nvcc 13.0, sm_80 and sm_90a, identity variant) and the largest spill-free
// one per bucket kept: d128 128x64x4w spills 146 B (255 regs) -> 8 warps (172 regs); d256 128x64x8w
// spills -> 128x32x8w (248 regs, 132 KiB smem); d64 128x64x4w spills 118 B with the relbias variant
// -> 8 warps (143 regs).
FLEXATTN_HD constexpr Sm80Tile sm80_fwd_tile(int d, int dv) {
  return sm80_dmax(d, dv) <= 128 ? Sm80Tile{128, 64, 8, 2} : Sm80Tile{128, 32, 8, 2};
}

// Backward dK/dV (one CTA per kv tile, walking query tiles): block_n kv rows resident, block_m query
// rows per step. d<=128: 64x64x8w, Q/dO double-buffered, 123 KiB, 228 regs; d<=256: 64x64 spills
// 220 B (dK+dV alone are 128 regs) -> 64x32x8w single-buffered, 111 KiB, 240 regs.
FLEXATTN_HD constexpr Sm80Tile sm80_bwd_tile(int d, int dv) {
  return sm80_dmax(d, dv) <= 128 ? Sm80Tile{64, 64, 8, 2} : Sm80Tile{64, 32, 8, 1};
}

// Deterministic dQ pass (one CTA per query tile, walking kv tiles), forward-shaped. d<=128: 252 regs
// (12 B spill at D=128/Dv=64); d<=256: 64x32 spills 28 B -> 64x16 (243 regs).
FLEXATTN_HD constexpr Sm80Tile sm80_bwd_dq_tile(int d, int dv) {
  return sm80_dmax(d, dv) <= 128 ? Sm80Tile{64, 64, 4, 2} : Sm80Tile{64, 16, 4, 2};
}

// How NW warps tile a ROWS x COLS output: WC warps across columns, NW / WC down rows. Minimises the
// ldmatrix.x4 count per 16-deep k step (MI A loads + NJ B loads); ties go to fewer column warps.
FLEXATTN_HD constexpr int warp_cols_for(int rows, int cols, int nw) {
  int best = 0, best_cost = 1 << 30;
  for (int wc = 1; wc <= nw; wc *= 2) {
    const int wr = nw / wc;
    if (nw % wc != 0 || cols % (wc * 16) != 0 || rows % (wr * 16) != 0) continue;
    const int cost = rows / wr / 16 + cols / wc / 16;
    if (cost < best_cost) {
      best_cost = cost;
      best = wc;
    }
  }
  return best;
}

// Head dims the backward can tile: its dK, dV and dQ accumulators (block_n x D, block_n x Dv, block_m x D)
// must split over its warps in 16 x 16 atoms. That holds for every multiple of 32 up to 128 and every
// multiple of 64 above; other multiples of 16 (48, 80, 160, ...) are zero-padded by the caller to the
// next head dims that do (sm80_padded_head_dim; the result is the same, the padding costs flops).
FLEXATTN_HD constexpr bool sm80_bwd_head_dims_ok(int d, int dv) {
  const Sm80Tile t = sm80_bwd_tile(d, dv);
  return warp_cols_for(t.block_n, d, t.warps) > 0 && warp_cols_for(t.block_n, dv, t.warps) > 0 &&
         warp_cols_for(t.block_m, d, t.warps) > 0;
}
// The smallest head dim >= d (with dv likewise padded) that both sm80 directions take: padding to a
// multiple of 16, then 32, then 64 until sm80_bwd_head_dims_ok holds. which = 0: D, 1: Dv.
FLEXATTN_HD constexpr int sm80_padded_head_dim(int d, int dv, int which) {
  for (int q = 16; q <= 64; q *= 2) {
    const int pd = (d + q - 1) / q * q, pdv = (dv + q - 1) / q * q;
    if (sm80_bwd_head_dims_ok(pd, pdv)) return which == 0 ? pd : pdv;
  }
  return -1;
}

// Row-parallel helper kernels (Δ preprocess, dQ convert).
constexpr int kSm80AuxThreads = 128;
constexpr int kSm80PreprocessRows = 16;  // 4 warps x 4 rows
constexpr int kSm80ConvertRows = 32;

FLEXATTN_HD constexpr int sm80_fwd_threads(int d, int dv) { return sm80_fwd_tile(d, dv).warps * 32; }
FLEXATTN_HD constexpr int sm80_bwd_threads(int d, int dv) { return sm80_bwd_tile(d, dv).warps * 32; }
FLEXATTN_HD constexpr int sm80_bwd_dq_threads(int d, int dv) { return sm80_bwd_dq_tile(d, dv).warps * 32; }
FLEXATTN_HD constexpr int sm80_aux_threads() { return kSm80AuxThreads; }

// Shared-memory bytes of a tile (rows padded by 8 elements; see warp_gemm.cuh).
FLEXATTN_HD constexpr int sm80_fwd_smem_for(Sm80Tile t, int d, int dv) {
  return 2 * (t.block_m * (sm80_dmax(d, dv) + 8) + 2 * t.block_n * (d + 8) + 2 * t.block_n * (dv + 8));
}
FLEXATTN_HD constexpr int sm80_bwd_smem_for(Sm80Tile t, int d, int dv) {
  return 2 * (t.block_n * (d + 8) + t.block_n * (dv + 8) + t.stages * t.block_m * (d + 8 + dv + 8) +
              2 * t.block_n * (t.block_m + 8)) +
         8 * t.stages * t.block_m;
}
FLEXATTN_HD constexpr int sm80_bwd_dq_smem_for(Sm80Tile t, int d, int dv) {
  return 2 * (t.block_m * (d + 8 + dv + 8) + 2 * t.block_n * (d + 8 + dv + 8));
}
FLEXATTN_HD constexpr int sm80_fwd_smem(int d, int dv) { return sm80_fwd_smem_for(sm80_fwd_tile(d, dv), d, dv); }
FLEXATTN_HD constexpr int sm80_bwd_smem(int d, int dv) { return sm80_bwd_smem_for(sm80_bwd_tile(d, dv), d, dv); }
FLEXATTN_HD constexpr int sm80_bwd_dq_smem(int d, int dv) {
  return sm80_bwd_dq_smem_for(sm80_bwd_dq_tile(d, dv), d, dv);
}

struct Sm80Launch {
  unsigned grid_x, grid_y, grid_z;
  unsigned block;
  unsigned smem;
};

FLEXATTN_HD constexpr unsigned sm80_cdiv(long long a, long long b) { return (unsigned)((a + b - 1) / b); }

// Grid: x = query tile, y = query head, z = batch.
FLEXATTN_HD constexpr Sm80Launch sm80_fwd_launch(int d, int dv, int B, int Hq, int L) {
  return Sm80Launch{sm80_cdiv(L, sm80_fwd_tile(d, dv).block_m), (unsigned)Hq, (unsigned)B,
                    (unsigned)sm80_fwd_threads(d, dv), (unsigned)sm80_fwd_smem(d, dv)};
}
FLEXATTN_HD constexpr Sm80Launch sm80_bwd_preprocess_launch(int B, int Hq, int L) {
  return Sm80Launch{sm80_cdiv(L, kSm80PreprocessRows), (unsigned)Hq, (unsigned)B, (unsigned)kSm80AuxThreads, 0u};
}
// Grid: x = kv tile, y = kv head, z = kv batch (Bkv; with Bkv == 1 one CTA sums over all batches).
FLEXATTN_HD constexpr Sm80Launch sm80_bwd_launch(int d, int dv, int Bkv, int Hkv, int S) {
  return Sm80Launch{sm80_cdiv(S, sm80_bwd_tile(d, dv).block_n), (unsigned)Hkv, (unsigned)Bkv,
                    (unsigned)sm80_bwd_threads(d, dv), (unsigned)sm80_bwd_smem(d, dv)};
}
FLEXATTN_HD constexpr Sm80Launch sm80_bwd_dq_launch(int d, int dv, int B, int Hq, int L) {
  return Sm80Launch{sm80_cdiv(L, sm80_bwd_dq_tile(d, dv).block_m), (unsigned)Hq, (unsigned)B,
                    (unsigned)sm80_bwd_dq_threads(d, dv), (unsigned)sm80_bwd_dq_smem(d, dv)};
}
FLEXATTN_HD constexpr Sm80Launch sm80_bwd_dq_convert_launch(int B, int Hq, int L) {
  return Sm80Launch{sm80_cdiv(L, kSm80ConvertRows), (unsigned)Hq, (unsigned)B, (unsigned)kSm80AuxThreads, 0u};
}

// The mask tile sizes a kernel set accepts: multiples of the compute tiles of every kernel that walks
// them (forward block_m, backward block_m / block_n, dQ pass block_m / block_n).
FLEXATTN_HD constexpr bool sm80_mask_blocks_ok(int d, int dv, int q_block, int kv_block, bool backward) {
  return q_block > 0 && kv_block > 0 && q_block % sm80_fwd_tile(d, dv).block_m == 0 &&
         kv_block % sm80_fwd_tile(d, dv).block_n == 0 &&
         (!backward || (q_block % sm80_bwd_tile(d, dv).block_m == 0 && kv_block % sm80_bwd_tile(d, dv).block_n == 0 &&
                        q_block % sm80_bwd_dq_tile(d, dv).block_m == 0 &&
                        kv_block % sm80_bwd_dq_tile(d, dv).block_n == 0));
}

}  // namespace flexattn::kern
