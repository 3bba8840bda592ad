#pragma once
// BlockMask construction on the GPU, torch's create_block_mask without the dense mask: the mask_mod is
// compiled (NVRTC, through the JIT cache) into kernels/common/block_mask_build.cuh, which classifies
// every (b, h, q-block, kv-block) tile and writes the eight index arrays in torch's layout.
// Device memory is O(tiles): 16 bytes of output and 2 bytes of scratch per tile, never O(q_len*kv_len).
//
// The result is identical, array for array, to the CPU build_block_mask (block_mask.h): the same tile
// classes (padding past the lengths counts as False, so a tail tile is never full) and the same
// ordered rows (members ascending, then the other ids ascending), has_full = true.
#include <cstdint>
#include <memory>
#include <string>

#include "flexattn/attention.h"
#include "flexattn/block_mask.h"
#include "flexattn/expr.h"
#include "flexattn/variant.h"

namespace flexattn {

// A BlockMask built on (and owned by) the GPU. Copies share the device memory.
class GpuBlockMask {
 public:
  GpuBlockMask() = default;
  // Pointers into the owned memory, valid while this object or a copy lives. has_full always.
  const DeviceBlockMask& view() const;
  // Waits for the build and copies every array to the host.
  BlockMask download() const;
  int device() const;
  // Device bytes held (outputs and scratch).
  size_t bytes() const;
  bool empty() const { return impl_ == nullptr; }

  struct Impl;

 private:
  explicit GpuBlockMask(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
  friend GpuBlockMask build_block_mask_gpu(const ir::Expr&, const DeviceBindings&, int64_t, int64_t, int64_t,
                                           int64_t, int, int, int, void*);
};

// Builds the BlockMask of `mask_mod` (a Bool mask_mod expression; empty = attend everywhere) for a mask
// of batch B and heads H (1 = broadcast; the mask is called with b < B, h < H), on `device`.
// `bindings` gives the mod's named scalars and captured buffers (data in device memory of `device`).
// Asynchronous on `stream` (a CUstream / cudaStream_t; null = the legacy default stream): the buffers
// must stay valid until the stream has passed the build; the first call per mod structure and arch
// compiles (or loads from the disk cache) and is synchronous.
// Throws flexattn::Error naming the argument for B, H, q_len, kv_len, q_block, kv_block < 1, a length
// above 2^31-1 (mask_mod takes int32 indices), a mask_mod that is not a Bool mask, a missing or
// mismatched scalar/buffer, or a device that does not exist; the message of a driver or NVRTC
// failure otherwise.
GpuBlockMask build_block_mask_gpu(const ir::Expr& mask_mod, const DeviceBindings& bindings, int64_t B, int64_t H,
                                  int64_t q_len, int64_t kv_len, int q_block = 128, int kv_block = 128,
                                  int device = 0, void* stream = nullptr);

// Host convenience (CLI, tests, benchmarks): uploads the captured buffers of `bindings` (host memory)
// to `device`, builds there, and downloads the result. Synchronous. Same errors as above.
BlockMask build_block_mask_gpu_host(const ir::Expr& mask_mod, const ModBindings& bindings, int64_t B, int64_t H,
                                    int64_t q_len, int64_t kv_len, int q_block = 128, int kv_block = 128,
                                    int device = 0);

// The CUDA translation units of the builder, exposed for compile tests: the classify kernel of a
// generated variant (`struct FlexVariant`, codegen.h: the builder header, the variant and the classify
// entry point), and the compact kernel, the same for every mask (its own program, compiled once).
std::string block_mask_build_source(const std::string& variant_source);
std::string block_mask_compact_source();
inline constexpr const char* kBlockMaskClassifyEntry = "flexattn_bm_classify";
inline constexpr const char* kBlockMaskCompactEntry = "flexattn_bm_compact";

}  // namespace flexattn
