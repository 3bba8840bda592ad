#pragma once
// Decoding on the cuda backend: short queries (1..64 rows per sequence) against a long K/V cache,
// contiguous or paged, with any variant (docs/kernels_decode.md).
//
// The query heads that share a kv head are packed into one tile (K/V read once per group) and the kv
// range is split across CTAs (split-KV), with an lse-weighted combine. Everything that changes from
// one decode step to the next is a runtime value (kv lengths, query positions, page table contents,
// literals and scalars of the mods), so one compiled kernel serves every step; a call neither
// allocates nor synchronises (the split workspace comes from the caller, sized by
// decode_workspace_bytes), so a step can be captured in a CUDA graph.
//
// Positions: query row i of sequence b is at logical position q_offsets[b] + i (or q_offset + i); kv
// row j is at logical position j of its sequence. score_mod / mask_mod and the block mask see these
// logical positions; kv positions at or past kv_lens[b] are masked.
//
// Paged layout: k and v are pools [num_pages, Hkv, page_size, D] (v: Dv); page_table[b][j / page_size]
// is the physical page of logical kv position j. One (page, kv head) is one contiguous run of
// page_size * D elements, so a page read by the kernel (which owns one kv head) is a single burst; any
// strides with a contiguous last dim (multiples of 8 elements) are accepted, [num_pages, page_size,
// Hkv, D] included. Page ids outside [0, num_pages) are never read; their kv rows are masked.
#include <cstdint>
#include <limits>

#include "flexattn/attention.h"

namespace flexattn {

struct DecodeArgs {
  const Variant* variant = nullptr;
  DeviceBindings bindings;
  TensorView q;    // [B, Hq, L, D], 1 <= L <= 64
  TensorView k, v; // contiguous [Bkv, Hkv, S, D] / [Bkv, Hkv, S, Dv]; paged: pools [num_pages, Hkv, page_size, D|Dv]
  TensorView out;  // [B, Hq, L, Dv]
  float* lse = nullptr;        // [B, Hq, L] natural log, optional
  float* max_score = nullptr;  // [B, Hq, L], optional
  const int32_t* page_table = nullptr;  // device int32 [B, max_pages] (row stride max_pages); null = contiguous
  int64_t max_pages = 0;
  const int32_t* kv_lens = nullptr;    // device int32 [B]; null = the capacity (S, or max_pages * page_size)
  const int32_t* q_offsets = nullptr;  // device int32 [B]; null = q_offset for every sequence
  int64_t q_offset = 0;
  // In logical positions: rows index query positions, columns kv positions (a mask built for the whole
  // cache, e.g. MAX x MAX, serves every step). BLOCK_SIZE: any q block, kv block a multiple of 64.
  const DeviceBlockMask* block_mask = nullptr;
  double scale = std::numeric_limits<double>::quiet_NaN();  // NaN = 1/sqrt(D)
  int num_splits = 0;  // 0 = from the SM count and the shapes (decode_num_splits); else 1..128
  void* workspace = nullptr;  // decode_workspace_bytes(args), 16-byte aligned; may be null when that is 0
  size_t workspace_bytes = 0;
  int device = 0;
  void* stream = nullptr;
};

// The number of kv splits a call with these shapes uses, and the workspace it needs (0 with one split).
// Both depend on shapes, num_splits and the device only (SM count, CTAs of the compiled kernel resident
// per SM), never on device data; the first query compiles and loads the kernels, as a call would.
int decode_num_splits(const DecodeArgs& args);
size_t decode_workspace_bytes(const DecodeArgs& args);

// Throws flexattn::Error naming the bad argument.
void cuda_decode(const DecodeArgs& args);

// Compiles (or finds in the cache) the decode kernels of a variant without running anything: for
// prewarming and the no-GPU compile tests. `arch` e.g. "sm_80", "sm_90a".
CompileReport compile_decode(const Variant& variant, DType dtype, int head_dim, int value_head_dim,
                             const std::string& arch);

}  // namespace flexattn
