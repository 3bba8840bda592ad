#pragma once
// Deterministic buffer gradients (issue 6: dq, dk, dv and buffer grads bitwise identical run to run). In
// deterministic mode the backward's kernels add every buffer-gradient contribution into exact accumulators in the
// workspace (kern::kExactWords 64-bit words per element, kernels/common/exact_sum.h) instead of fp32 atomics;
// one small kernel then rounds each element's exact sum once and adds it into the caller's fp32 accumulator.
// Integer sums do not depend on the order of arrival, so neither do the gradients, whichever family runs.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "flexattn/attention.h"
#include "flexattn/jit.h"
#include "jit/driver_api.h"

namespace flexattn::runtime {

// Bytes of the exact accumulators of a call (each 256-aligned): 264 per element of every learnable buffer named in
// a.fwd.bindings.buffer_grads, sized from a.fwd.bindings.buffers' shapes; 0 outside deterministic mode.
size_t exact_grad_bytes(const BackwardArgs& a);

struct ExactGrads {
  struct Slot {
    float* user = nullptr;          // the caller's fp32 accumulator
    const long long* words = nullptr;  // its exact accumulator in the workspace
    int64_t numel = 0;
  };
  std::vector<Slot> slots;
  jit::CUfunction finish = nullptr;  // the rounding kernel, loaded by begin_exact_grads
};

// Deterministic calls with buffer gradients: loads the rounding kernel for `arch` (the call's device current), zeroes
// the accumulators at `ws` (exact_grad_bytes of them) on the call's stream and points a's non-null buffer_grads at
// them; returns what finish_exact_grads needs. Otherwise nothing.
ExactGrads begin_exact_grads(BackwardArgs& a, char* ws, const std::string& arch);
// Adds each element's rounded exact sum into the caller's accumulator (one launch per buffer, on the stream).
void finish_exact_grads(const ExactGrads& g, void* stream);
// The rounding kernel for `arch`, compiled once per process (disk-cached): compile_variant prewarms it for
// deterministic backward calls with buffer gradients, so a first call (or a graph capture) does not compile it.
jit::CompiledKernel exact_grads_kernel(const std::string& arch);

}  // namespace flexattn::runtime
