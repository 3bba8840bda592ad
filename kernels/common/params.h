#pragma once
// Kernel ABI: the one struct every attention kernel receives by value. Filled by host code (g++) and read
// by device code (nvcc / NVRTC), so it holds plain types only (int, long long, float, double, pointers)
// and includes nothing. Layout is identical on x86-64 and NVPTX64 (LP64, natural alignment); the
// static_asserts below pin the sizes the generated code and the host rely on.
//
// Conventions (host must guarantee; the runtime validates before launch):
//  - q, k, v, out, dout, dq, dk, dv hold 16-bit elements (bf16 or fp16, the kernel's template dtype);
//    the last dim is contiguous; strides are in *elements* for dims (b, h, l); every base pointer is
//    16-byte aligned and every stride a multiple of 8 (16-byte vector loads/stores, cp.async).
//  - Shapes: q [B,Hq,L,D], k [Bkv,Hkv,S,D], v [Bkv,Hkv,S,Dv], out/dout [B,Hq,L,Dv], dq [B,Hq,L,D],
//    dk [Bkv,Hkv,S,D], dv [Bkv,Hkv,S,Dv]. Bkv is 1 (broadcast; dK/dV summed over batch) or B.
//    Hq % Hkv == 0; query head h reads kv head h / (Hq / Hkv).
//  - lse, max_score, delta: fp32 [B,Hq,L] contiguous. lse and max_score are in NATURAL log units
//    (kernels work in log2 internally and convert once); fully masked rows hold -inf. Either may be
//    null in the forward (not written). The backward reads lse (natural units).
//  - dlse: fp32 [B,Hq,L] contiguous, the gradient w.r.t. the natural-log lse, or null (= 0).
//  - dq_accum: fp32 [B,Hq,L,D] contiguous workspace, zeroed by the preprocess kernel (not with dq_claim: the
//    first writer of each query tile stores it); null when deterministic != 0, except with dq_sem (the sm90
//    backward's ordered dQ reductions).
//  - Block mask (torch BlockMask layout, int32, contiguous): kv_num_blocks [mask_B,mask_H,nq],
//    kv_indices [mask_B,mask_H,nq,nkv], q_num_blocks [mask_B,mask_H,nkv], q_indices
//    [mask_B,mask_H,nkv,nq]; full_* alike and may be null (no full blocks). Kernels index
//    b % mask_B, h % mask_H. q_block / kv_block are the mask tile sizes (torch BLOCK_SIZE); each must
//    be a multiple of the kernel's compute tile in that dimension (tile_config.h), the no-mask
//    sentinel 1 << 30 included. kv_num_blocks == null means "no block mask": every tile is visited as
//    a partial tile (mask_mod applied if the variant has one). Out-of-range block indices are skipped,
//    never dereferenced.
//  - ModParams: values the generated variant reads at run time (never baked into the kernel):
//      lit[i]       the i-th literal slot of the mod IR (ir::literal_slots order)
//      scalar[i]    the i-th named scalar (ir::scalar_names order)
//      buf[i]       captured buffer i (ir::buffers order), contiguous row-major, element type fixed by
//                   the generated code; buf_shape[i][0..rank) its shape, unused dims 1
//      buf_grad[i]  fp32 gradient accumulator of buffer i (same shape, zeroed by the host), or null
//      buf_numel[i] buffer i's element count (the product of its shape)
//  - q_map, k_map, v_map, o_map: Hopper TMA descriptors (CUtensorMap, opaque, 128 bytes, 128-aligned)
//    of q, k, v, out, encoded on the host by src/runtime/tma_sm90.cc for the sm90 family only (zero
//    otherwise). They must stay in kernel parameter space: entries take `const __grid_constant__
//    AttnParams`, and TMA reads a map through the address of the parameter field.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define FLEXATTN_HD __host__ __device__
#define FLEXATTN_HD_INLINE __host__ __device__ __forceinline__
#else
#define FLEXATTN_HD
#define FLEXATTN_HD_INLINE inline
#endif
// FLEXATTN_HD_INLINE: always inlined in device code, and a plain inline function on the host (the block-list walker,
// common/mask_iter.cuh, which the host tests run as the kernels do).

namespace flexattn::kern {

constexpr int kModLits = 64;
constexpr int kModScalars = 16;
constexpr int kModBufs = 8;
constexpr int kModBufRank = 4;

struct ModParams {
  double lit[kModLits];
  double scalar[kModScalars];
  const void* buf[kModBufs];
  long long buf_shape[kModBufs][kModBufRank];
  // fp32 gradient accumulators; with the low bit set (deterministic mode, runtime/exact_grads.cc), the address + 1 of
  // exact accumulators of kExactWords 64-bit words per element (common/exact_sum.h, variant.cuh's
  // buffer_grad_accumulate).
  float* buf_grad[kModBufs];
  // Elements of buffer i (the product of buf_shape[i]): the word stride of its exact accumulators, read once per add
  // instead of the four-way product (session 34: ~17 instructions per add in the sm90 backward's flush).
  long long buf_numel[kModBufs];
};

// A CUtensorMap as the kernel sees it (cuda.h: alignas(128) cuuint64_t opaque[16]).
struct alignas(128) TmaDesc {
  unsigned long long opaque[16];
};

struct AttnParams {
  // Forward tensors.
  const void* q;
  const void* k;
  const void* v;
  void* out;
  float* lse;        // natural log; may be null in the forward
  float* max_score;  // natural units; may be null
  long long q_sb, q_sh, q_sl;
  long long k_sb, k_sh, k_sl;
  long long v_sb, v_sh, v_sl;
  long long out_sb, out_sh, out_sl;

  int B, Hq, Hkv, Bkv;
  int L, S;   // query and kv lengths
  int D, Dv;  // head dims of q/k and of v/out (also template parameters; kept for checks)
  float scale;

  // Block mask.
  const int* kv_num_blocks;
  const int* kv_indices;
  const int* full_kv_num_blocks;
  const int* full_kv_indices;
  const int* q_num_blocks;
  const int* q_indices;
  const int* full_q_num_blocks;
  const int* full_q_indices;
  int mask_B, mask_H;
  int nq, nkv;
  int q_block, kv_block;

  // Backward.
  const void* dout;
  void* dq;
  void* dk;
  void* dv;
  float* delta;     // [B,Hq,L] written by the preprocess kernel
  const float* dlse;  // may be null
  float* dq_accum;  // [B,Hq,L,D]; null when deterministic (unless dq_sem)
  long long dout_sb, dout_sh, dout_sl;
  long long dq_sb, dq_sh, dq_sl;
  long long dk_sb, dk_sh, dk_sl;
  long long dv_sb, dv_sh, dv_sl;
  int deterministic;  // != 0: bitwise reproducible dQ (ordered reductions with dq_sem, else a separate pass)
  // sm90 backward, deterministic mode with ordered dQ (sm90/bwd_dq_order_sm90.h): gridDim.x - 1, so the
  // non-persistent kernel takes kv tile |bwd_kv_flip - rank| (descending; rank = blockIdx.x, or the grouped
  // order's, sm90_bwd_grid_tile); 0 otherwise. A parameter
  // rather than a select on dq_sem: ptxas rematerializes it in the consumers (the select spilled 8 bytes,
  // t5 + causal with buffer-gradient reduction, NVRTC 13.0).
  int bwd_kv_flip;

  ModParams mod;

  // Hopper forward (appended so the fields above keep their offsets).
  TmaDesc q_map, k_map, v_map, o_map;

  // Decode family (kernels/decode; docs/kernels_decode.md). Appended; zero for the other families.
  //  - page_table: int32 [B, max_pages] (row stride max_pages), logical page -> physical page, or null
  //    for contiguous K/V. When set, k / v are page pools [num_pages, Hkv, page_size, D] addressed with
  //    k_sb / v_sb = page stride, k_sh / v_sh = head stride, k_sl / v_sl = row stride in a page.
  //  - kv_lens: int32 [B] valid kv length per sequence (clamped to [0, S]), or null (= S); S is the
  //    capacity: the contiguous length, or max_pages * page_size.
  //  - q_offsets: int32 [B] logical position of query row 0 per sequence, or null (= q_offset). Mods and
  //    the block mask see logical positions q_offset + row and kv.
  //  - part_o: fp32 [num_splits, B*Hq*L, Dv] unnormalised partial outputs; part_ml: fp32
  //    [num_splits, B*Hq*L, 2] (running max in log2 units, row sum). Unused when num_splits == 1.
  //  - pack_heads: query heads packed into one tile (Hq / Hkv, or 1 when the block mask has per-head
  //    lists); num_splits: CTAs sharing one row tile's kv range.
  const int* page_table;
  const int* kv_lens;
  const int* q_offsets;
  float* part_o;
  float* part_ml;
  int page_size, max_pages, num_pages;
  int q_offset;
  int pack_heads, num_splits;

  // Positions the mods see (forward and backward families; decode reads q_offset above the same way):
  // query row i is at q_offset + i and kv row j at kv_offset + j (ForwardArgs.q_offset / kv_offset;
  // a context-parallel piece or a chunk of a longer sequence). Bounds and block-mask lookups stay local.
  int kv_offset;

  // Decode family: log2(page_size) when it is a power of two, else -1. A runtime division per loaded
  // 16-byte chunk and per score column halved the paged decode's bandwidth on the H200 (1.9 vs 3.1 TB/s
  // contiguous); pages are powers of two in practice (vLLM 16, torch 128).
  int page_shift;

  // Decode family: 1 when each K / V byte is read by one CTA of the launch (kern::decode_kv_read_once; set by the
  // launch): FLEXATTN_DECODE_EVICT_FIRST loads it at L2 evict_first priority then, and at evict_normal otherwise.
  int kv_read_once;

  // sm90 persistent forward (sm90/fwd_scheduler_sm90.cuh, "Queue word"): the launch's tile-queue word,
  // 0 at launch and left at 0; null = the static stride. Set by runtime/sm90_tile_queue.cc only.
  unsigned* tile_queue;

  // Decode family, FLEXATTN_DECODE_MERGE (decode/attn_decode.cuh, decode_merge_last): one counter per row tile of
  // the split launch (index blockIdx.y * gridDim.x + blockIdx.x), 0 at launch and left at 0; the last split to
  // finish merges the tile. Null: the combine kernel merges. Set by runtime/split_counters.cc only.
  unsigned* split_counters;

  // sm90 backward, deterministic mode (sm90/bwd_dq_order_sm90.h): semaphores of the ordered dQ reductions,
  // int32 [B, Hq, ceil(L / 64)] and one abandon word, in the backward workspace, zeroed by the preprocess
  // kernel. Set by runtime/sm90_backward.cc for the non-persistent bulk dQ kernels only; null otherwise
  // (deterministic mode then computes dQ in the sm80 family's separate pass).
  int* dq_sem;
  // sm90 backward with the TMA dQ reductions (FLEXATTN_SM90_BWD_DQ_CLAIM; sm90/bwd_dq_claim_sm90.cuh): one word per
  // (b, h, 64-row query tile), int32 [B, Hq, ceil(L / 64)] in the backward workspace, zeroed by the preprocess
  // kernel, which then leaves dq_accum uncleared: the first dQ writer of a tile claims it (0 -> 1), stores its
  // partial, and marks it stored (2); the others add after that; the dQ convert writes zeros for tiles left at 0.
  // Null: dq_accum is cleared and every writer adds.
  int* dq_claim;
  // With dq_claim: a query tile whose kv blocks (block-mask row, partial and full lists; every kv row without a block
  // mask) span more than this many kv rows is cleared by the preprocess and marked stored (2), so its writers add at
  // once (bwd_dq_claim_rule, bwd_dq_claim_sm90.cuh). Set by runtime/sm90_backward.cc (FLEXATTN_SM90_BWD_DQ_CLAIM_MAX_KV).
  int dq_claim_max_kv;
  // sm90 backward, non-persistent kernel: the launch order of its (kv tile, kv head, kv batch) CTAs is kv tile
  // major within groups of this many (kv head, kv batch) pairs, a smaller group first (sm90_bwd_grid_tile,
  // tile_config_sm90_bwd.h; FLEXATTN_SM90_BWD_HEAD_GROUPS). 1 (and 0): one pair after the other, the grid's own
  // order. The persistent kernel's work tiles follow the same order (sm90_bwd_work_tile, read at run time).
  int bwd_head_group;
  // Non-persistent sm90 backward with the grouped order compiled in (FLEXATTN_SM90_BWD_CTA_ORDER, default on): launch
  // position k runs natural grouped index bwd_cta_order[k] (sm90/bwd_cta_order_sm90.cuh: the short CTAs deferred to
  // the end), written by the flexattn_bwd_cta_order entry before the main kernel; 2 x (its CTAs) ints of workspace.
  // Null: the natural order.
  const int* bwd_cta_order;

  // Block mask, sm90 forward: [mask_B, mask_H, nq] or null, each mask (b, h)'s query-block rows, most kv blocks
  // first (a permutation of 0 .. nq-1 per (b, h)). The work tiles follow it when q_block is the query tile
  // (FLEXATTN_SM90_ROW_ORDER; fwd_scheduler_sm90.cuh, fwd_ordered_index). Null: the natural order.
  const int* q_order;
  // With q_order: a device int, nonzero when some mask (b, h)'s natural order (last rows first) is not longest
  // first, so that q_order is worth its lookup per tile; 0: the natural order (read with each tile claimed). Null: q_order
  // always (FLEXATTN_SM90_ROW_ORDER=1, or a host-built order the host found worth it).
  const int* q_order_on;

  // sm90 backward v3 (FLEXATTN_SM90_BWD_V3): dq_accum [B*Hq, L, D] fp32 as a 3-D TMA map, box (32, 64, 1),
  // 128B swizzle; the dQ writer adds the shared dQ tile with D / 32 tensor reductions. Unused otherwise.
  TmaDesc dq_map;

  // sm90 backward (non-persistent kernels): != 0 when dk_map / dv_map hold dK / dV ([Bkv, Hkv, S, D / Dv], 4-D maps
  // as k_map's, boxes of 64 rows x 64 columns, 128B swizzle): the CTA's epilogue stages dK / dV in the freed K / V
  // slabs and stores them with TMA (bwd_consumer_sm90.cuh, store_dk_dv_tma); 0: one global store per
  // accumulator pair (store_dk_dv). Set by runtime/sm90_backward.cc (FLEXATTN_SM90_BWD_TMA_STORE).
  int dkv_tma;
  TmaDesc dk_map, dv_map;
};

static_assert(sizeof(ModParams) == 1088, "ModParams layout is part of the kernel ABI");
static_assert(sizeof(TmaDesc) == 128 && alignof(TmaDesc) == 128, "CUtensorMap layout");
static_assert(sizeof(AttnParams) <= 4096, "kernel parameter space");

}  // namespace flexattn::kern
