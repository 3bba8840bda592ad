#pragma once
// The C++ API of the cuda backend: attention over tensor views on a CUDA stream. Nothing here
// allocates device memory behind the caller's back: the backward asks for a workspace, sized by
// backward_workspace_bytes().
//
// Kernels are generated from the Variant, compiled with NVRTC once per structure (literal values and
// scalars are runtime parameters) and cached on disk (src/jit).
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "flexattn/block_mask.h"
#include "flexattn/dtype.h"
#include "flexattn/variant.h"

namespace flexattn {

// A strided view of device memory. Strides in elements; the last dim must be contiguous.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::BF16;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // empty = contiguous row-major
};

// A BlockMask resident on the device (int32 arrays in torch's layout). Use upload_block_mask() or
// point the fields at tensors you own (e.g. a torch BlockMask's).
struct DeviceBlockMask {
  const int32_t* kv_num_blocks = nullptr;
  const int32_t* kv_indices = nullptr;
  const int32_t* full_kv_num_blocks = nullptr;  // null: no full blocks
  const int32_t* full_kv_indices = nullptr;
  const int32_t* q_num_blocks = nullptr;  // needed by the backward
  const int32_t* q_indices = nullptr;
  const int32_t* full_q_num_blocks = nullptr;  // the backward needs both full pairs or neither
  const int32_t* full_q_indices = nullptr;
  int64_t B = 1, H = 1, nq = 0, nkv = 0, q_len = 0, kv_len = 0;
  int q_block = 128, kv_block = 128;
  // Optional [B, H, nq]: each (b, h)'s query-block rows, most kv blocks (partial + full) first -- a permutation
  // of 0 .. nq-1 per (b, h), as block_mask_row_order() computes it. The Hopper forward takes its work tiles in
  // this order (longest first for any mask, not only causal-like ones): with FLEXATTN_SM90_ROW_ORDER=1 always,
  // by default (auto) where q_order_on says so. Anything but such a permutation makes the forward compute some
  // rows twice and others never.
  const int32_t* q_order = nullptr;
  // Optional, with q_order: one device int32, nonzero when the natural order (last rows first) is not longest
  // first for some (b, h) (row_order_worth_it), so that the order pays for its lookup per tile; 0 keeps the
  // natural order. Null under auto: q_order always. Lets a caller whose mask lives on the device decide there.
  const int32_t* q_order_on = nullptr;
};

// Runtime values of the variant on the device: named scalars, captured buffers (data on the
// device) and, for the backward, fp32 gradient accumulators of learnable buffers (zeroed by the
// caller; same shape as the buffer).
struct DeviceBindings {
  std::map<std::string, double> scalars;
  std::map<std::string, ir::BufferView> buffers;
  std::map<std::string, float*> buffer_grads;
};

struct ForwardArgs {
  const Variant* variant = nullptr;
  DeviceBindings bindings;
  TensorView q, k, v, out;              // q [B,Hq,L,D], k [Bkv,Hkv,S,D], v [Bkv,Hkv,S,Dv], out [B,Hq,L,Dv]
  float* lse = nullptr;                 // [B,Hq,L] natural log, optional (required for a later backward)
  float* max_score = nullptr;           // [B,Hq,L], optional
  const DeviceBlockMask* block_mask = nullptr;  // null = dense (mask_mod everywhere)
  double scale = std::numeric_limits<double>::quiet_NaN();  // NaN = 1/sqrt(D)
  // Positions the mods see: query row i is at q_offset + i, kv row j at kv_offset + j (a chunk of a
  // longer sequence, a context-parallel piece). The block mask, the bounds and the outputs stay in the
  // call's own rows and columns. The backward uses its forward args' offsets. 0 <= offset, offset + length <= 2^30.
  int64_t q_offset = 0, kv_offset = 0;
  int device = 0;
  void* stream = nullptr;  // CUstream / cudaStream_t; null = legacy default stream
};

struct BackwardArgs {
  ForwardArgs fwd;             // the forward's arguments; out and lse as the forward produced them
  TensorView dout;             // [B,Hq,L,Dv]
  const float* dlse = nullptr; // [B,Hq,L] gradient of the natural-log lse, optional
  TensorView dq, dk, dv;       // outputs, shapes of q, k, v
  // Bitwise identical dq / dk / dv and buffer gradients run to run. Buffer gradients are then summed exactly (264
  // workspace bytes per element of each learnable buffer; up to 2^32 same-sign contributions per element) and
  // rounded once into buffer_grads.
  bool deterministic = false;
  void* workspace = nullptr;   // at least backward_workspace_bytes(args), 16-byte aligned
  size_t workspace_bytes = 0;
};

// Deterministic mode needs more: the fp32 dQ accumulator and the ordered-dQ semaphores of the Hopper backward
// (about B*Hq*L*D*4 bytes), whichever family the call then takes, and 264 bytes per element of each learnable buffer
// in fwd.bindings.buffer_grads (sized from fwd.bindings.buffers' shapes) for their exact sums. Reads fwd.q's and
// fwd.k's shapes (the Hopper backward's launch order takes two ints per kv tile of each kv head); throws
// flexattn::Error when q is 4-D and k's shape is not set.
size_t backward_workspace_bytes(const BackwardArgs& args);

// Throw flexattn::Error naming the bad argument (shape, dtype, alignment, block mask, bindings).
void cuda_forward(const ForwardArgs& args);
void cuda_backward(const BackwardArgs& args);

// Compiles (or finds in the cache) the kernels a call would use, without running anything: for
// prewarming a cache and for the no-GPU compile tests. `arch` e.g. "sm_80", "sm_90a". On sm_90a that is
// the Hopper family wherever the dispatch would take it (FLEXATTN_SM90 / FLEXATTN_SM90_BWD on and the
// head dims supported; a mask-block or layout decline at call time still falls back to the portable
// family); `portable` = true compiles the portable sm80 family instead (its compile tier on sm_90a).
// `deterministic` (backward only) also compiles the deterministic mode's dQ pass where that mode uses it
// (the portable family; on sm_90a only with FLEXATTN_SM90_BWD_ORDERED_DQ=0, the per-element dQ path or
// the persistent kernel: the Hopper kernel otherwise orders its own dQ reductions), which a backward
// otherwise compiles at its first deterministic call; its entry ("flexattn_bwd_dq") joins the report; and, for a
// variant with buffer gradients, the kernel that rounds their exact sums ("flexattn_exact_grad_finish").
// `block_mask`: for a call with a block mask (the forward's tile can depend on it: without one, D = Dv = 64 takes the
// tall tile, FLEXATTN_SM90_FWD_TALL), so that the prewarmed forward is the one that call looks up.
struct CompileReport {
  std::string key;
  std::map<std::string, int> registers;      // per entry function
  std::map<std::string, int64_t> spill_bytes; // stores + loads, per entry function
};
CompileReport compile_variant(const Variant& variant, DType dtype, int head_dim, int value_head_dim,
                              const std::string& arch, bool backward, bool portable = false,
                              bool deterministic = false, bool block_mask = false);

// Head dims every cuda kernel takes, forward and backward: the smallest (d', dv') >= (d, dv) that are (48 ->
// 64, 80 -> 96, 160 -> 192; 64 -> 64). Zero-padding q and k to d' and v to dv' leaves the result unchanged
// (slice out[..., :dv]); the forward alone takes any multiple of 16. Throws flexattn::Error outside 1..256.
struct HeadDims {
  int d = 0, dv = 0;
};
HeadDims cuda_padded_head_dims(int d, int dv);

// The NVRTC target of a device ("sm_80", "sm_90a", ...). Throws flexattn::Error without a driver.
std::string cuda_device_arch(int device);

// Is the cuda backend usable here (driver + device + NVRTC)? `why` receives the reason if not.
bool cuda_available(std::string* why = nullptr);

}  // namespace flexattn
