#pragma once
// Helpers shared by the BlockMask sources: sizes with overflow checks, torch's "ordered" row layout and
// its transposition.
#include <cstdint>
#include <string>
#include <vector>

#include "flexattn/block_mask.h"

namespace flexattn::block_mask_detail {

// a * b, throwing Error("<who>: <what> is too large ...") on int64 overflow.
int64_t checked_mul(int64_t a, int64_t b, const char* who, const char* what);

// For a >= 0, b >= 1; written without a + b - 1 so that huge lengths cannot overflow.
inline int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

// Throws Error unless B, H, q_len, kv_len, q_block, kv_block >= 1 and the block counts fit int32.
void check_geometry(const char* who, int64_t B, int64_t H, int64_t q_len, int64_t kv_len, int64_t q_block,
                    int64_t kv_block);

// Writes one row of torch's ordered layout: the ids with member[i] != 0 ascending, then the others
// ascending (what torch's stable descending argsort gives); returns the member count.
int32_t write_ordered_row(const uint8_t* member, int64_t n, int32_t* indices);

// Transposes an ordered [BH, rows] x cols layout into [BH, cols] x rows (torch's _transpose_ordered):
// entry (r, c) is a member iff c is among the first num[r] indices of row r.
void transpose_ordered(const std::vector<int32_t>& num, const std::vector<int32_t>& indices, int64_t bh,
                       int64_t rows, int64_t cols, std::vector<int32_t>& t_num,
                       std::vector<int32_t>& t_indices);

// Fills q_* (and full_q_* when has_full) from kv_* / full_kv_*.
void compute_q_side(BlockMask& bm);

// Checks geometry, vector sizes, counts, index ranges, duplicates and partial/full disjointness of the
// kv side; `who` prefixes every message.
void check_kv_side(const BlockMask& bm, const char* who);

// Classes (kBlockSkipped / kBlockPartial / kBlockFull) of row (b, h, row) into out[0, nkv). Assumes a
// valid kv side.
void row_classes(const BlockMask& bm, int64_t b, int64_t h, int64_t row, uint8_t* out);

// A BlockMask with the geometry set and every vector sized (ordered layout filled by the caller).
BlockMask empty_like_geometry(int64_t B, int64_t H, int64_t q_len, int64_t kv_len, int q_block, int kv_block,
                              bool has_full);

}  // namespace flexattn::block_mask_detail
