#pragma once
// Context parallelism: attention over a sequence split across ranks (docs/cp.md).
//
//  - merge_attention / merge_attention_backward: combine attentions computed over disjoint KV subsets
//    into the attention over their union, exactly, through their natural-log lse.
//  - plan_shards: given a BlockMask and N ranks, which KV shards each rank needs (shards the mask never
//    touches for its rows are skipped), the estimated work per rank and the ring schedule.
//  - CPU execution of a plan with the CPU oracle (offset_mods, slice_blocks, cpu_plan_forward/backward):
//    the dataflow the NCCL ring will have, runnable and testable without a GPU.
#include <cstdint>
#include <vector>

#include "flexattn/block_mask.h"
#include "flexattn/reference.h"
#include "flexattn/tensor.h"

namespace flexattn::cp {

// ---- Merging partial results -----------------------------------------------------------------------
// Partial i is attention over a KV subset K_i (out_i [B,H,L,Dv], lse_i [B,H,L], natural log, any float
// dtype); the K_i are disjoint. Per row, with m = max_i lse_i (so no exp overflows):
//   lse = m + log Σ_i exp(lse_i − m),   out = Σ_i exp(lse_i − lse) · out_i
// A partial with lse_i = −inf saw nothing in that row; it is skipped whatever its out_i holds. Rows that
// every partial skips: out = 0, lse = −inf (never NaN). An lse_i of +inf gives lse = +inf and NaN out, a
// NaN lse_i NaN lse and out: what the unsplit oracle gives for those rows. Results are F64.
struct Merged {
  HostTensor out;  // F64 [B, H, L, Dv]
  HostTensor lse;  // F64 [B, H, L]
};
Merged merge_attention(const std::vector<HostTensor>& outs, const std::vector<HostTensor>& lses);

// Gradients to each partial given the gradients of the merged result (dlse null = 0). With
// w_i = exp(lse_i − lse) (0 for skipped partials and fully masked rows):
//   dout_i = w_i · dout,   dlse_i = w_i · (dlse + Σ_d dout · (out_i − out))
// Feeding (dout_i, dlse_i) to the backward of partial i yields that partial's exact share of the
// unsplit dq, dk, dv: its Δ_i = Σ out_i·dout_i − dlse_i equals w_i·Δ, and w_i·P_i = P.
struct MergeGrads {
  std::vector<HostTensor> douts;  // F64, shapes of outs[i]
  std::vector<HostTensor> dlses;  // F64, shapes of lses[i]
};
MergeGrads merge_attention_backward(const std::vector<HostTensor>& outs, const std::vector<HostTensor>& lses,
                                    const HostTensor& dout, const HostTensor* dlse);

// ---- Sub-problems for the CPU oracle -----------------------------------------------------------------
// The mods of a sub-problem whose query rows start at q_offset and kv columns at kv_offset: every
// wrapped function adds the offsets, so the user's mods see absolute positions. Empty functions stay
// empty (identity score_mod, attend everywhere). `mods` is copied.
cpu::ModFns offset_mods(const cpu::ModFns& mods, int64_t q_offset, int64_t kv_offset);

// Tiles [q_block_begin, q_block_end) x [kv_block_begin, kv_block_end) of every (b, h) of `bm` as a
// BlockMask of their own: q_len / kv_len are the tokens those tiles cover (the tail tile included when
// the range reaches nq / nkv), classes unchanged, q_* recomputed. Pair it with offset_mods(mods,
// q_block_begin * q_block, kv_block_begin * kv_block).
BlockMask slice_blocks(const BlockMask& bm, int64_t q_block_begin, int64_t q_block_end, int64_t kv_block_begin,
                       int64_t kv_block_end);

// Positions [begin, end) of dim 2 (the sequence) of a 3-D [B,H,L] or 4-D [B,H,L,D] tensor; dtype kept.
HostTensor slice_seq(const HostTensor& t, int64_t begin, int64_t end);

// ---- Sharding planner --------------------------------------------------------------------------------
// The sequence (q and kv alike) is cut into chunks of whole blocks, as even as the block counts allow.
//   contiguous: N chunks, rank r holds chunk r.
//   zigzag:     2N chunks, rank r holds chunks r and 2N−1−r (balances causal masks: early rows are cheap,
//               late rows expensive, and each rank gets one of each).
// A rank holds the query rows and the kv ("its kv shard") of its chunks.
enum class Layout { contiguous, zigzag };
const char* layout_name(Layout layout);

struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

struct Chunk {
  Range q_blocks, kv_blocks;  // block ids
  Range q_rows, kv_cols;      // token positions
};

// One (query chunk, kv chunk) piece with at least one non-skipped tile: one oracle/kernel call on the
// sub-problem slice_blocks(bm, q_blocks, kv_blocks) with offset mods.
struct Piece {
  int q_chunk = 0, kv_chunk = 0;
  int64_t tiles = 0;  // non-skipped tiles, over the mask's B x H
  double work = 0;    // their weighted sum (see PlanOptions)
};

// Ring step t of rank r: it holds kv shard (r − direction·t) mod N, computes its pieces if it needs that
// shard, and passes the shard on (to r + direction) unless t is the last step.
struct RingStep {
  int kv_shard = 0;
  bool compute = false;
  double work = 0;
  std::vector<Piece> pieces;  // empty unless compute
};

struct RankPlan {
  std::vector<int> chunks;          // ascending chunk ids held by the rank
  std::vector<int> needed_shards;   // kv shards (= owning ranks) with work for its rows, in ring order
  std::vector<int> skipped_shards;  // the others: the mask never touches them for its rows
  double work = 0;                  // sum over needed shards
  std::vector<RingStep> steps;      // ring_steps entries
};

struct ShardPlan {
  int world_size = 1;
  Layout layout = Layout::contiguous;
  // The mask's geometry, checked when the plan is executed.
  int64_t B = 1, H = 1, q_len = 0, kv_len = 0;
  int q_block = 128, kv_block = 128;
  std::vector<Chunk> chunks;  // N or 2N, by chunk id
  std::vector<RankPlan> ranks;
  // Shards travel one hop per step; the direction is the one that needs fewer steps (+1 on ties).
  // ring_steps = 1 + the largest hop distance from a needed shard to its rank (0 if nothing is needed),
  // which is below N for masks with locality (sliding window: 2 with the contiguous layout).
  int direction = 1;
  int ring_steps = 0;
  double max_work = 0, mean_work = 0;
  double imbalance() const { return mean_work > 0 ? max_work / mean_work - 1.0 : 0.0; }
};

struct PlanOptions {
  // Work of a partial tile relative to a full one: partial tiles also evaluate mask_mod. Skipping
  // mask_mod on full tiles is worth ~15–20% on causal (semantics.md §14.5), hence 1.2.
  double partial_weight = 1.2;
};

// The chunk ids rank `rank` holds under `layout` (ascending).
std::vector<int> chunks_of_rank(int rank, int world_size, Layout layout);

// Tile work = (partial ? partial_weight : 1) x (fraction of the tile inside the lengths), summed over
// the mask's B x H. Throws Error naming the argument: world_size < 1, fewer query or kv blocks than
// chunks, partial_weight not finite or <= 0, a malformed block mask.
ShardPlan plan_shards(const BlockMask& bm, int world_size, Layout layout, const PlanOptions& options = {});

// ---- Executing a plan on the CPU ---------------------------------------------------------------------
// What the ranks do, sequentially: for each rank, each ring step that computes, each piece: the oracle
// on (q rows of the q chunk, k/v of the kv chunk) with offset_mods and slice_blocks(bm, ...); the
// partials of each q chunk merged with merge_attention (rows without any piece: out 0, lse −inf).
// `bm` must be the mask the plan was made from; options.block_mask must be null (scale and threads
// are used). Results are F64 and equal the unsplit cpu::forward / cpu::backward up to rounding.
Merged cpu_plan_forward(const ShardPlan& plan, const BlockMask& bm, const HostTensor& q, const HostTensor& k,
                        const HostTensor& v, const cpu::ModFns& mods, const cpu::Options& options = {});

// Backward: per q chunk, the pieces are recomputed, merge_attention_backward splits (dout, dlse), each
// piece's cpu::backward adds its dq to the q chunk's rows and its dk/dv to the kv chunk's columns (on
// the ring: sent back to the shard's owner).
cpu::BackwardResult cpu_plan_backward(const ShardPlan& plan, const BlockMask& bm, const HostTensor& q,
                                      const HostTensor& k, const HostTensor& v, const HostTensor& dout,
                                      const HostTensor* dlse, const cpu::ModFns& mods,
                                      const cpu::Options& options = {});

}  // namespace flexattn::cp
