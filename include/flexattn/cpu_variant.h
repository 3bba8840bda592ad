#pragma once
// Binds an IR Variant and its runtime values to the CPU oracle's callbacks (cpu::ModFns): the mods
// are evaluated by the IR interpreter (the definition), the score gradient and the learnable-buffer
// gradients by the symbolic derivative.
#include <map>
#include <memory>
#include <string>

#include "flexattn/block_mask.h"
#include "flexattn/reference.h"
#include "flexattn/tensor.h"
#include "flexattn/variant.h"

namespace flexattn::cpu {

class VariantFns {
 public:
  // `threads` must match Options::threads of the reference call (buffer gradients are accumulated
  // per thread). Throws flexattn::Error for a missing scalar or buffer, or a malformed mod.
  VariantFns(const Variant& variant, const ModBindings& bindings, int threads);
  ~VariantFns();
  VariantFns(const VariantFns&) = delete;
  VariantFns& operator=(const VariantFns&) = delete;

  const ModFns& fns() const;
  // Gradient of each buffer in variant.grad_buffers (F64, the buffer's shape), summed over threads
  // in a fixed order. Zero before a backward call.
  std::map<std::string, HostTensor> buffer_grads() const;
  void reset_buffer_grads();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flexattn::cpu
