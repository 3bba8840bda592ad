#pragma once
// Parameters of the GPU block-mask builder (common/block_mask_build.cuh). Plain types only, so host
// code (g++) and device code (nvcc / NVRTC) share the layout, as with params.h.
#include "common/params.h"

namespace flexattn::kern {

constexpr int kBmThreads = 256;  // 8 warps per CTA, both entries; one warp per tile / per index row
constexpr int kBmMinBlocks = 2;  // CTAs per SM: caps registers at 128 (mods hoist up to 16 per-row
                                 // values each); 16 warps per SM still cover the ISETP chain latency

struct BlockMaskBuildParams {
  ModParams mod;
  unsigned char* cls_rows;  // [BH, nq, nkv] tile classes (0 skipped, 1 partial, 2 full), scratch
  unsigned char* cls_cols;  // [BH, nkv, nq] the same, transposed, scratch
  int* kv_num_blocks;       // [BH, nq]
  int* kv_indices;          // [BH, nq, nkv]
  int* full_kv_num_blocks;  // [BH, nq]
  int* full_kv_indices;     // [BH, nq, nkv]
  int* q_num_blocks;        // [BH, nkv]
  int* q_indices;           // [BH, nkv, nq]
  int* full_q_num_blocks;   // [BH, nkv]
  int* full_q_indices;      // [BH, nkv, nq]
  long long num_tiles;      // B * H * nq * nkv
  int B, H;                 // mask batch / heads (1 = broadcast); the mask sees b < B, h < H
  int q_len, kv_len;        // >= 1 (mask_mod takes int indices)
  int q_block, kv_block;    // >= 1
  int nq, nkv;              // ceil(len / block)
};

static_assert(sizeof(BlockMaskBuildParams) == sizeof(ModParams) + 10 * 8 + 8 + 8 * 4,
              "BlockMaskBuildParams layout is part of the kernel ABI");

}  // namespace flexattn::kern
