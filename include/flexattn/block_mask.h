#pragma once
// BlockMask with torch's layout (torch.nn.attention.flex_attention.BlockMask): int32 tensors, row-major.
//   kv_num_blocks [B,H,nQ]      number of *partial* kv blocks per query-block row (mask_mod evaluated)
//   kv_indices    [B,H,nQ,nKV]  their column ids, ascending, first kv_num_blocks valid; rest unspecified
//   full_kv_*                   the same for *full* blocks (mask_mod skipped); empty vectors if absent
//   q_num_blocks  [B,H,nKV], q_indices [B,H,nKV,nQ], full_q_*: the transposes (for dK/dV)
// B and H may be 1 (broadcast: kernels index b % B, h % H). q_block/kv_block: BLOCK_SIZE = (Q, KV).
// Invariant: partial and full sets are disjoint; a block past the lengths counts as masked, so a tail
// tile is never full.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace flexattn {

struct BlockMask {
  int64_t B = 1, H = 1;
  int64_t q_len = 0, kv_len = 0;  // seq_lengths
  int q_block = 128, kv_block = 128;
  int64_t nq = 0, nkv = 0;  // ceil(q_len / q_block), ceil(kv_len / kv_block)
  bool has_full = false;
  std::vector<int32_t> kv_num_blocks, kv_indices;
  std::vector<int32_t> full_kv_num_blocks, full_kv_indices;
  std::vector<int32_t> q_num_blocks, q_indices;
  std::vector<int32_t> full_q_num_blocks, full_q_indices;
};

// Evaluates the mask for one query row over kv in [kv_begin, kv_end): out[j] = mask(b, h, q, kv_begin + j).
using MaskRowFn = std::function<void(int64_t b, int64_t h, int64_t q, int64_t kv_begin, int64_t kv_end,
                                     uint8_t* out)>;
using MaskFn = std::function<bool(int64_t b, int64_t h, int64_t q, int64_t kv)>;
// The one interval of kv positions a query row keeps: {lo, hi} means mask(b, h, q, kv) == (lo <= kv <= hi); lo > hi:
// the row keeps nothing. Bounds may lie outside [0, kv_len).
using MaskRowRangeFn = std::function<std::pair<int64_t, int64_t>(int64_t b, int64_t h, int64_t q)>;

// ---- Building -------------------------------------------------------------------------------------
// Classifies every (b, h, q-block, kv-block) tile by evaluating the mask over it: full = every element
// True and the tile lies entirely inside [0,q_len) x [0,kv_len); partial = some element True otherwise;
// skipped = no element True. Padding past the lengths counts as masked, as in torch's create_block_mask.
// B and H are the mask's batch/head sizes (1 = broadcast; the mask is then called with b = 0 / h = 0).
// Memory is O(B*H*nq*nkv) plus one kv_block row buffer per thread; a dense [q_len, kv_len] array never
// exists. A tile stops being evaluated once it has shown both a True and a False (it is partial).
// Rows are spread over `threads` std::threads (0 = hardware concurrency; capped at the row count and
// 256); `mask` must be thread-safe. A MaskRowFn must write out[0, kv_end - kv_begin): 0 = False.
// Output: kv_* and full_kv_* with torch's ordering (members ascending, then the remaining block ids
// ascending, i.e. a stable descending argsort), the transposes q_* / full_q_*, has_full = true.
// Throws Error naming the argument for B, H, q_len, kv_len, q_block, kv_block < 1 or threads < 0; an
// exception thrown by `mask` is rethrown on the calling thread.
BlockMask build_block_mask(const MaskRowFn& mask, int64_t B, int64_t H, int64_t q_len, int64_t kv_len,
                           int q_block = 128, int kv_block = 128, int threads = 0);
BlockMask build_block_mask(const MaskFn& mask, int64_t B, int64_t H, int64_t q_len, int64_t kv_len,
                           int q_block = 128, int kv_block = 128, int threads = 0);
// The same BlockMask for a mask given as one kv interval per query row (ir::kv_range: causal, sliding windows,
// prefix-LM, ...): O(q_len + nq * nkv) per (b, h), one call of `range` per row, instead of one mask value per
// entry (causal at S = 131072: milliseconds instead of seconds). Same errors as above.
BlockMask build_block_mask_from_ranges(const MaskRowRangeFn& range, int64_t B, int64_t H, int64_t q_len,
                                       int64_t kv_len, int q_block = 128, int kv_block = 128, int threads = 0);

// torch's BlockMask.from_kv_blocks. kv_num_blocks [B,H,nq], kv_indices [B,H,nq,nkv_cols]; the full pair
// is both null or both given ([B,H,nq] and [B,H,nq,nkv_cols]); has_full = (full pair given).
// q_len = -1 means nq*q_block, kv_len = -1 means nkv_cols*kv_block (torch's default seq_lengths). Unlike
// torch, the lengths must agree with the block counts: nq == ceil(q_len/q_block) and
// nkv_cols == ceil(kv_len/kv_block) (the BlockMask invariant). kv_* are kept as given; q_* and full_q_*
// are computed by transposition. Throws Error (see validate) on inconsistent input.
BlockMask from_kv_blocks(const std::vector<int32_t>& kv_num_blocks, const std::vector<int32_t>& kv_indices,
                         const std::vector<int32_t>* full_kv_num_blocks,
                         const std::vector<int32_t>* full_kv_indices, int64_t B, int64_t H, int64_t nq,
                         int64_t nkv_cols, int q_block = 128, int kv_block = 128, int64_t q_len = -1,
                         int64_t kv_len = -1);

// Throws Error unless `bm` is well formed: sizes >= 1, nq/nkv match the lengths, every vector has its
// documented size (full_* empty when !has_full), counts in [0, nkv] (resp. [0, nq]), the first `count`
// indices of each row in range and distinct, partial and full sets disjoint, and q_* / full_q_* exactly
// the transposes of kv_* / full_kv_* (as sets; order within a row is free).
void validate(const BlockMask& bm);

// ---- Inspection -----------------------------------------------------------------------------------
// Inspection and operations first check the kv side as validate does (Error prefixed with their name).
// Tile classes, [B,H,nq,nkv] row-major: 0 = skipped, 1 = partial (mask_mod evaluated), 2 = full.
constexpr uint8_t kBlockSkipped = 0, kBlockPartial = 1, kBlockFull = 2;
std::vector<uint8_t> to_dense(const BlockMask& bm);
// torch's BlockMask.to_dense(): 1 where the tile is computed (partial or full), else 0.
std::vector<uint8_t> to_dense_01(const BlockMask& bm);

// Like torch's to_string: a header line, then for each (b, h) (at most `limit`, then "...") a line
// "(b, h)" and a grid of at most max_rows x max_rows cells (-1 = one cell per tile), each printed twice
// for aspect ratio. A cell covering several tiles is full only if all are full, empty only if all are
// skipped, else partial. Glyphs: '█' full, '░' partial, ' ' skipped; ascii: '#', '+', '.'.
// Unlike torch (whose to_dense merges them) full and partial tiles are told apart.
std::string to_string(const BlockMask& bm, int max_rows = 20, bool ascii = false, int limit = 4);

// Percent of the B*H*nq*nkv tiles that are skipped. Equals torch's sparsity() when the lengths are block
// multiples; for tail tiles torch divides block areas by the unpadded element count (and can even go
// negative), which torch_sparsity reproduces exactly.
double sparsity(const BlockMask& bm);
double torch_sparsity(const BlockMask& bm);

struct BlockMaskStats {
  int64_t partial = 0, full = 0, skipped = 0, total = 0;  // tile counts over [B,H,nq,nkv]
};
BlockMaskStats block_mask_stats(const BlockMask& bm);

// [B, H, nq]: each (b, h)'s query-block rows ordered by their kv-block count (partial + full), most first,
// ties last row first (the forward's natural order, kept where it is longest first already): a permutation of
// 0 .. nq-1 per (b, h).
// DeviceBlockMask::q_order (the Hopper forward's longest-first work order). Throws Error on a malformed mask.
std::vector<int32_t> block_mask_row_order(const BlockMask& bm);

// ---- Operations -----------------------------------------------------------------------------------
// Query-block rows [row_begin, row_end) of every (b, h), as torch's bm[:, :, row_begin:row_end] (decode:
// one row, pos / q_block). Unlike torch, which keeps the old seq_lengths, q_len becomes the length those
// rows cover (row count * q_block, less the tail if the last row is included) so that
// nq == ceil(q_len/q_block) still holds. q_* recomputed. Needs 0 <= row_begin < row_end <= nq.
BlockMask slice_q_blocks(const BlockMask& bm, int64_t row_begin, int64_t row_end);

// Tile-wise combination of two masks with equal lengths and block sizes; B (and H) must be equal or one
// of them 1 (the result takes the larger). AND: full iff both full, skipped iff either skipped, else
// partial. OR: full iff either full, skipped iff both skipped, else partial. Only the block structure is
// combined: the caller must pair the result with the combined mask_mod (and_masks / or_masks of the two
// mods), which partial tiles still evaluate. has_full of the result: AND = both, OR = either. The result
// is conservative, not exact: e.g. two complementary partial tiles AND to a partial tile that is all False.
BlockMask and_block_masks(const BlockMask& a, const BlockMask& b);
BlockMask or_block_masks(const BlockMask& a, const BlockMask& b);

}  // namespace flexattn
