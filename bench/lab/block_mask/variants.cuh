#pragma once
// Hand-written mask variants for the block-mask lab, shaped like the codegen's output (ModParams
// slots for literals and buffers, int wrap helpers, clamped gathers) but __host__ __device__ so the CPU
// oracle evaluates the very same function. Only mask_mod is used by the block-mask kernels.
#include "common/params.h"

namespace lab {

using flexattn::kern::ModParams;
#define LAB_HD __host__ __device__ __forceinline__

LAB_HD int lab_sub(int a, int b) { return (int)((unsigned)a - (unsigned)b); }
LAB_HD long long lab_clamp(long long i, long long n) {
  if (i < 0) i += n;
  if (i < 0) i = 0;
  if (i >= n) i = n - 1;
  return i;
}
LAB_HD int lab_read_i32(const void* p, long long i) { return ((const int*)p)[i]; }
LAB_HD int lab_mod(int a, int b) {
  if (b == 0 || b == -1) return 0;
  int r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

struct Causal {
  static constexpr const char* kName = "causal";
  LAB_HD static bool mask_mod(const ModParams& p, int b, int h, int q_idx, int kv_idx) { return q_idx >= kv_idx; }
};

struct Full {
  static constexpr const char* kName = "full";
  LAB_HD static bool mask_mod(const ModParams& p, int b, int h, int q_idx, int kv_idx) { return true; }
};

// lit[0] = window
struct SlidingWindow {
  static constexpr const char* kName = "sliding_window";
  LAB_HD static bool mask_mod(const ModParams& p, int b, int h, int q_idx, int kv_idx) {
    // One temporary per node, as codegen emits it. Written `t0 && (t1 <= (int)p.lit[0])` instead, the
    // literal's load and F2I.F64 sit behind the short-circuit and are not hoisted out of the scan:
    // 6.39 ms instead of the generated variant's 3.08 ms at S=131072.
    const bool t0 = q_idx >= kv_idx;
    const int t1 = lab_sub(q_idx, kv_idx);
    const bool t2 = t1 <= (int)p.lit[0];
    return t0 && t2;
  }
};

// lit[0] = prefix
struct PrefixLm {
  static constexpr const char* kName = "prefix_lm";
  LAB_HD static bool mask_mod(const ModParams& p, int b, int h, int q_idx, int kv_idx) {
    return (kv_idx < (int)p.lit[0]) || (q_idx >= kv_idx);
  }
};

// buf[0] = doc_ids (int32, rank 1)
struct Document {
  static constexpr const char* kName = "document";
  LAB_HD static bool mask_mod(const ModParams& p, int b, int h, int q_idx, int kv_idx) {
    const int t0 = lab_read_i32(p.buf[0], lab_clamp((long long)q_idx, p.buf_shape[0][0]));
    const int t1 = lab_read_i32(p.buf[0], lab_clamp((long long)kv_idx, p.buf_shape[0][0]));
    return t0 == t1;
  }
};

struct DocumentCausal {
  static constexpr const char* kName = "document_causal";
  LAB_HD static bool mask_mod(const ModParams& p, int b, int h, int q_idx, int kv_idx) {
    return Document::mask_mod(p, b, h, q_idx, kv_idx) && q_idx >= kv_idx;
  }
};

// Chunks whose size depends on b and h: lit[0] + h * lit[1] + b * lit[2].
struct HeadChunk {
  static constexpr const char* kName = "head_chunk";
  LAB_HD static bool mask_mod(const ModParams& p, int b, int h, int q_idx, int kv_idx) {
    const int c = (int)p.lit[0] + h * (int)p.lit[1] + b * (int)p.lit[2];
    return q_idx / c == kv_idx / c;
  }
};

// Rare isolated Trues (a hash): tiles are mostly skipped, a few partial through one element.
struct Sparse {
  static constexpr const char* kName = "sparse";
  LAB_HD static bool mask_mod(const ModParams& p, int b, int h, int q_idx, int kv_idx) {
    unsigned x = (unsigned)q_idx * 0x9E3779B1u ^ (unsigned)kv_idx * 0x85EBCA77u ^ (unsigned)(b * 31 + h) * 0xC2B2AE3Du;
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    x ^= x >> 12;
    return lab_mod((int)(x & 0x7fffffff), 4099) == 0;
  }
};

}  // namespace lab
