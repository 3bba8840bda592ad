#pragma once
// The one tile table of the sm90 (Hopper, sm_90a) forward family, its shared-memory layout and launch
// geometry. Compiles as host C++ (the runtime sizes and launches from it) and as device code.
//
// Fixed structure (hopper.md sections 0, 2.1): 384 threads = 1 producer warpgroup (one lane issues
// TMA) + 2 consumer warpgroups of 64 query rows each, so block_m = 128 for every head dim (the opt-in tall
// tile below, 3 consumer warpgroups, is the one exception: D = 64 without a block mask). 128 rows
// is also torch's default BlockMask tile, and the mask tile must be a multiple of the compute tile,
// which rules out FA3's 192-row (hdim 64) and 176/80-wide kv tiles: block_n must divide 128.
// Registers: setmaxnreg moves the producer to 24 and the consumers to 240
// (128 * 24 + 256 * 240 = 64,512 <= 65,536); the entry cap of __launch_bounds__(384, 1) is 168 (the tall
// tile: 512 threads, entry 128, consumers 160).
//
// Measured (H200, bf16, S=8192, one CTA per tile, before the persistent scheduler): d128 dense 645,
// causal 563, d64 dense 396 TFLOP/s (bench/RESULTS.md). The rows are otherwise the reasoning below, not
// yet a sweep.
#include "common/params.h"

namespace flexattn::kern {

constexpr int kSm90Threads = 384;
constexpr int kSm90ConsumerWarpgroups = 2;
constexpr int kSm90ProducerRegs = 24;
constexpr int kSm90ConsumerRegs = 240;
constexpr int kSm90SmemLimit = 227 * 1024;  // per-CTA opt-in maximum on H100 / H200

struct Sm90FwdTile {
  int block_m;     // query rows per CTA (consumer warpgroups x 64)
  int block_n;     // kv rows per pipeline stage
  int stages;      // K/V ring depth
  int warpgroups;  // consumer warpgroups: 2, or 3 for the tall tile
};

// The tall tile (FLEXATTN_SM90_FWD_TALL, opt-in): three consumer warpgroups, 192 x 128 at head dim 64, as FA3 runs
// hdim 64 -- there one warpgroup's softmax (one exp2 per 256 tensor-core flops) outlasts the other's GEMMs, so
// with two the tensor cores wait (dense D=64 423 TFLOP/s against cuDNN's 487, bench/RESULTS.md); a third
// warpgroup's GEMMs fill that gap. 192 rows are not a multiple of the 128-row mask tile, so only calls without
// a block mask take it (the host's choice, runtime/attention_cuda.cc), and only the (not narrow) D = Dv = 64
// tile. 512 threads: the consumers get setmaxnreg 160 (128 * 24 + 384 * 160 = 64,512), where the D = 64
// consumer compiles without spills (ptxas 13.0; at the two-warpgroup kernel's 168 entry cap it spilled 180
// bytes with setmaxnreg 160: the entry cap has to be 128).
FLEXATTN_HD constexpr bool sm90_fwd_tall_ok(int d, int dv, bool narrow) { return d == 64 && dv == 64 && !narrow; }
constexpr int kSm90TallConsumerRegs = 160;
constexpr int kSm90TallThreads = 512;
constexpr int kSm90MaxConsumerWarpgroups = 3;

FLEXATTN_HD constexpr int sm90_dmax(int d, int dv) { return d > dv ? d : dv; }

// Head dims the family compiles for: multiples of 64 (one TMA box row of 128 bytes = one 128B-swizzle
// span per slab) up to 256 (wgmma N limit for P V).
FLEXATTN_HD constexpr bool sm90_head_dim_ok(int d) { return d == 64 || d == 128 || d == 192 || d == 256; }

// The forward's kernel head dim for a call's head dim d: d itself where the family compiles for it, else (65..255, a
// multiple of 16 as the API takes them, so rows are 16-byte aligned for TMA) the next one up, 0 where none serves
// (d < 64 and the sm80 family takes it). The
// kernel of the padded dim runs the call unchanged: the TMA loads of Q, K and V fill the columns past d with zeros (the
// maps keep the call's d), so Q K^T and the P V columns past Dv are exact zeros, and the O store's map drops them.
// Costs the padded dim's time (D = 96: 75 % of the D = 128 kernel's flops are the call's own); issue 5's "96 if cheap".
FLEXATTN_HD constexpr int sm90_padded_head_dim(int d) {
  if (sm90_head_dim_ok(d)) return d;
  if (d <= 64 || d > 256 || d % 16 != 0) return 0;
  return d <= 128 ? 128 : d <= 192 ? 192 : 256;
}

// Rows (per thread accumulator registers: O = Dv/2, S = block_n/2, P = block_n/4):
//  d <= 64 : 128 x 128, 4 stages. O 32 + S 64 + P 32 regs; smem 16 K (Q) + 4 x 32 K = 144 KiB. The kv
//            tile cannot grow past 128 (mask tile), so depth buys the latency hiding instead.
//  d <= 128: 128 x 128, 2 stages (FA3's causal tile; its 176-wide non-causal tile is ruled out above).
//            O 64 + S 64 + P 32 = 160 regs; smem 32 K + 2 x 64 K = 160 KiB (3 stages = 224 KiB also
//            fits under 227 KiB: a first tuning candidate).
//  d <= 192: 128 x 64, 3 stages. O 96 + S 32 + P 16; smem 48 K + 3 x 48 K = 192 KiB.
//  d <= 256: 128 x 64, 2 stages (FA3: 128 x 80, "hits the limit of smem"). O 128 + S 32 + P 16;
//            smem 64 K + 2 x 64 K = 192 KiB.
// `narrow` (variants whose mods read captured buffers, see runtime/tma_sm90.h): block_n 64 for every
// head dim, 4 stages up to d 128. Measured at compile time (ptxas 13.0, d 128): the relative-bias
// gather spilled 24-136 bytes at 128 x 128 -- ptxas hoists the 64-bit index math of all 64 gathers
// of a thread's tile -- and none at 128 x 64; the T5 bucket variant also compiles in half the time.
// tall: the three-warpgroup tile where sm90_fwd_tall_ok (else ignored): 192 x 128, 4 stages; smem 2 x 24 K (Q,
// two buffers) + 4 x 32 K = 176 KiB.
FLEXATTN_HD constexpr Sm90FwdTile sm90_fwd_tile(int d, int dv, bool narrow = false, bool tall = false) {
  return tall && sm90_fwd_tall_ok(d, dv, narrow) ? Sm90FwdTile{192, 128, 4, 3}
         : sm90_dmax(d, dv) <= 64                ? Sm90FwdTile{128, narrow ? 64 : 128, 4, 2}
         : sm90_dmax(d, dv) <= 128 ? (narrow ? Sm90FwdTile{128, 64, 4, 2} : Sm90FwdTile{128, 128, 2, 2})
         : sm90_dmax(d, dv) <= 192 ? Sm90FwdTile{128, 64, 3, 2}
                                   : Sm90FwdTile{128, 64, 2, 2};
}

// Threads of the forward: a producer warpgroup and the consumer warpgroups.
FLEXATTN_HD constexpr int sm90_fwd_threads(int d, int dv, bool narrow = false, bool tall = false) {
  return 128 * (1 + sm90_fwd_tile(d, dv, narrow, tall).warpgroups);
}

// Shared-memory layout (byte offsets from a 1024-aligned base; every tile 1024-aligned because the
// 128B swizzle pattern is taken from address bits 4-9). A tile of R rows and C columns is stored as
// C/64 slabs of [R][64] elements, 128-byte rows, 16-byte chunks XOR-swizzled by (row % 8): exactly what
// a TMA box (64, R) with CU_TENSOR_MAP_SWIZZLE_128B writes.
//   q      : `q_bufs` Q buffers of a half per consumer warpgroup (2, or 3 tall) of 64 x max(D, Dv); a half
//            holds that warpgroup's Q rows, then its O tile for the TMA store (sized for the larger
//            head dim).
//   k, v   : `stages` tiles of block_n x D and block_n x Dv.
//   bars   : full_q per Q buffer, then per stage full_k, full_v, empty_k, empty_v, then q_free per Q
//            buffer (8 bytes each).
//   info   : per stage the kv tile start written by the producer (-1 = end of the list) and its kind;
//            persistent only: then per Q buffer the kv-tile count of the work tile whose Q it holds.
// The default (one CTA per tile) has one Q buffer and no counts. The persistent kernel
// (FLEXATTN_SM90_PERSISTENT=1, sm90/fwd_scheduler_sm90.cuh) takes a second Q buffer where it fits:
// the next work tile's Q then loads during this tile's mainloop instead of after its epilogue.
//   d <= 128 : +32 KiB at d 128 (192 KiB at 128 x 128 x 2 stages and at the narrow 128 x 64 x 4),
//              +16 KiB at d 64 (160 KiB).
//   d >  128 : one buffer (d 192: 240 KiB, d 256: 256 KiB would not fit 227 KiB).
struct Sm90FwdSmem {
  int q_half, q_bufs, q, k_stage, k, v_stage, v, bars, info, counts, rel, total;
};
// rel: per consumer warp a table of block_n + 15 floats (rounded up to block_n + 16), the distance-only bias of the
// warp's 16 rows x block_n columns (FLEXATTN_SM90_REL_DIAG, fwd_rel_diag_sm90.cuh): 4.5 KiB at block_n 128 with two
// consumer warpgroups, 6.75 KiB tall. Only in the layouts of kernels that use them (rel_tables), and last, so no other
// offset moves: the others keep their request (the D = 64 persistent one would cross the 164 KiB carveout step).
FLEXATTN_HD constexpr int sm90_rel_diag_table_floats(int block_n) { return block_n + 16; }

FLEXATTN_HD constexpr Sm90FwdSmem sm90_fwd_smem_layout_with(int d, int dv, bool narrow, int q_bufs, bool counts,
                                                            bool tall = false, bool rel_tables = false) {
  const Sm90FwdTile t = sm90_fwd_tile(d, dv, narrow, tall);
  Sm90FwdSmem s{};
  s.q_half = 64 * sm90_dmax(d, dv) * 2;
  s.q_bufs = q_bufs;
  s.q = 0;
  s.k_stage = t.block_n * d * 2;
  s.k = s.q + q_bufs * t.warpgroups * s.q_half;
  s.v_stage = t.block_n * dv * 2;
  s.v = s.k + t.stages * s.k_stage;
  s.bars = s.v + t.stages * s.v_stage;
  s.info = s.bars + 8 * (2 * q_bufs + 4 * t.stages);
  s.counts = s.info + 8 * t.stages;
  const int end = s.counts + (counts ? 8 * q_bufs : 0);
  s.rel = (end + 15) / 16 * 16;
  s.total = rel_tables ? s.rel + t.warpgroups * 4 * sm90_rel_diag_table_floats(t.block_n) * 4 : end;
  return s;
}

// Q buffers of the persistent kernel: two at d <= 128 where the layout (plus the base-alignment
// slack) fits the opt-in limit, else one.
FLEXATTN_HD constexpr int sm90_fwd_q_buffers(int d, int dv, bool narrow, bool tall = false, bool rel_tables = false) {
  return sm90_dmax(d, dv) <= 128 &&
                 sm90_fwd_smem_layout_with(d, dv, narrow, 2, true, tall, rel_tables).total + 1024 <= kSm90SmemLimit
             ? 2
             : 1;
}

FLEXATTN_HD constexpr Sm90FwdSmem sm90_fwd_smem_layout(int d, int dv, bool narrow = false, bool persistent = false,
                                                       bool tall = false, bool rel_tables = false) {
  return persistent ? sm90_fwd_smem_layout_with(d, dv, narrow, sm90_fwd_q_buffers(d, dv, narrow, tall, rel_tables), true,
                                                tall, rel_tables)
                    : sm90_fwd_smem_layout_with(d, dv, narrow, 1, false, tall, rel_tables);
}

// Dynamic shared memory to request: the layout plus slack to round the base up to 1024 bytes.
FLEXATTN_HD constexpr int sm90_fwd_smem(int d, int dv, bool narrow = false, bool persistent = false,
                                        bool tall = false, bool rel_tables = false) {
  return sm90_fwd_smem_layout(d, dv, narrow, persistent, tall, rel_tables).total + 1024;
}

struct Sm90Launch {
  unsigned grid_x, grid_y, grid_z;
  unsigned block;
  unsigned smem;
};

// The CTAs walk the (query tile, head, batch) tiles in the order of sm90/fwd_scheduler_sm90.cuh with a
// stride of the grid size. persistent: one CTA per SM (at most one per tile) and the persistent
// kernel's shared memory (the generated source must have been built with kPersistent, see
// runtime/kernel_source_sm90.cc: that kernel traps when given less); otherwise one CTA per tile,
// launched in that order. Measured (H200, B=4 H=16 S=2048 D=128), before the persistent kernel had
// its own handshake: persistent was 6-7% slower than one CTA per tile on dense, causal and
// sliding-window (516 vs 550 TFLOP/s dense): the end marker took one of the two ring slots at every
// tile change and Q waited for both warpgroups' epilogues. Both are gone from the kPersistent kernel
// (kv-tile counts, two Q buffers); it stays opt-in (FLEXATTN_SM90_PERSISTENT=1) until measured.
FLEXATTN_HD constexpr Sm90Launch sm90_fwd_launch(int d, int dv, bool narrow, int B, int Hq, int L, int sm_count,
                                                 bool persistent, bool tall = false, bool rel_tables = false) {
  const int bm = sm90_fwd_tile(d, dv, narrow, tall).block_m;
  const long long tiles = (long long)((L + bm - 1) / bm) * Hq * B;
  const long long ctas = !persistent || tiles < sm_count ? tiles : (sm_count > 0 ? sm_count : 1);
  return Sm90Launch{(unsigned)ctas, 1u, 1u, (unsigned)sm90_fwd_threads(d, dv, narrow, tall),
                    (unsigned)sm90_fwd_smem(d, dv, narrow, persistent, tall, rel_tables)};
}

// The mask tile sizes the forward accepts (the no-mask sentinel 1 << 30 qualifies).
FLEXATTN_HD constexpr bool sm90_mask_blocks_ok(int d, int dv, bool narrow, int q_block, int kv_block) {
  return q_block > 0 && kv_block > 0 && q_block % sm90_fwd_tile(d, dv, narrow).block_m == 0 &&
         kv_block % sm90_fwd_tile(d, dv, narrow).block_n == 0;
}

static_assert(sm90_fwd_smem(64, 64) <= kSm90SmemLimit, "smem d64");
static_assert(sm90_fwd_smem(128, 128) <= kSm90SmemLimit, "smem d128");
static_assert(sm90_fwd_smem(192, 192) <= kSm90SmemLimit, "smem d192");
static_assert(sm90_fwd_smem(256, 256) <= kSm90SmemLimit, "smem d256");
static_assert(sm90_fwd_smem(64, 256) <= kSm90SmemLimit, "smem d64/dv256");
static_assert(sm90_fwd_smem(128, 128, true) <= kSm90SmemLimit, "smem d128 narrow");
static_assert(sm90_fwd_smem(64, 64, false, true) <= kSm90SmemLimit && sm90_fwd_q_buffers(64, 64, false) == 2,
              "persistent d64: two Q buffers");
static_assert(sm90_fwd_smem(128, 128, false, true) <= kSm90SmemLimit && sm90_fwd_q_buffers(128, 128, false) == 2,
              "persistent d128: two Q buffers");
static_assert(sm90_fwd_smem(128, 128, true, true) <= kSm90SmemLimit && sm90_fwd_q_buffers(128, 128, true) == 2,
              "persistent d128 narrow: two Q buffers");
static_assert(sm90_fwd_smem(192, 192, false, true) <= kSm90SmemLimit, "persistent d192");
static_assert(sm90_fwd_smem(256, 256, false, true) <= kSm90SmemLimit, "persistent d256");
static_assert(sm90_fwd_smem(64, 256, false, true) <= kSm90SmemLimit, "persistent d64/dv256");
static_assert(sm90_fwd_smem(64, 64, false, false, true) <= kSm90SmemLimit, "smem d64 tall");
static_assert(sm90_fwd_smem(64, 64, false, true, true) <= kSm90SmemLimit && sm90_fwd_q_buffers(64, 64, false, true) == 2,
              "persistent d64 tall: two Q buffers");
static_assert(sm90_fwd_tile(64, 64, true, true).warpgroups == 2 && sm90_fwd_tile(128, 128, false, true).warpgroups == 2,
              "the tall tile only at D = Dv = 64, not narrow");
static_assert(sm90_fwd_threads(64, 64, false, true) == kSm90TallThreads, "the generated entry's launch bounds");
static_assert(sm90_fwd_tile(64, 64, false, true).block_n == sm90_fwd_tile(64, 64, false, false).block_n,
              "the host encodes the K/V maps' boxes from the usual tile (runtime/tma_sm90.cc): same block_n");
static_assert(kSm90ProducerRegs * 128 + kSm90ConsumerRegs * 256 <= 65536, "register file");
static_assert(kSm90ProducerRegs * 128 + kSm90TallConsumerRegs * 384 <= 65536, "register file, tall");

}  // namespace flexattn::kern
