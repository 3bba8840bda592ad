#pragma once
// Host-tensor convenience over the cuda backend (the CLI, the GPU tests and the benchmarks use it):
// uploads inputs, the block mask and the captured buffers, runs the kernels, downloads the results.
// Outputs are poisoned (NaN bytes) before each launch, so an element a kernel forgets to write can
// never pass a comparison.
#include <limits>
#include <map>
#include <string>

#include "flexattn/block_mask.h"
#include "flexattn/tensor.h"
#include "flexattn/variant.h"

namespace flexattn {

struct CudaHostRequest {
  const Variant* variant = nullptr;
  const ModBindings* bindings = nullptr;  // host buffers and scalars
  const HostTensor* q = nullptr;          // any float dtype; converted to `dtype` on upload
  const HostTensor* k = nullptr;
  const HostTensor* v = nullptr;
  DType dtype = DType::BF16;
  const BlockMask* block_mask = nullptr;  // null = dense
  double scale = std::numeric_limits<double>::quiet_NaN();
  int64_t q_offset = 0, kv_offset = 0;    // positions the mods see (ForwardArgs)
  const HostTensor* dout = nullptr;       // non-null: run the backward too
  const HostTensor* dlse = nullptr;
  bool deterministic = false;
  int device = 0;
  int timing_reps = 0;                    // > 0: also time forward (and backward) over this many runs
};

struct CudaHostResult {
  HostTensor out, lse, max_score;         // F32
  HostTensor dq, dk, dv;                  // F32 (when dout given)
  std::map<std::string, HostTensor> buffer_grads;  // F32
  double fwd_ms = 0, bwd_ms = 0;          // median per call when timing_reps > 0
};

CudaHostResult cuda_run_host(const CudaHostRequest& request);

}  // namespace flexattn
