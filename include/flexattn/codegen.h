#pragma once
// Codegen: IR -> one CUDA C++ variant functor (the contract in kernels/common/variant.cuh).
// The variant reads every literal, named scalar and buffer from the kernel's ModParams, so changing
// a literal never changes the source (and never recompiles).
#include <string>
#include <vector>

#include "flexattn/expr.h"
#include "flexattn/variant.h"

namespace flexattn::codegen {

// Limits of ModParams (kernels/common/params.h); exceeding one is a clear error.
constexpr int kMaxLiterals = 64;
constexpr int kMaxScalars = 16;
constexpr int kMaxBuffers = 8;

// How runtime values map onto ModParams slots. Holds the expressions it was derived from, so the
// literal nodes stay alive.
struct VariantLayout {
  std::vector<ir::Expr> literals;            // slot k = literals[k]->value
  std::vector<std::string> scalars;          // slot k = value of scalar scalars[k]
  std::vector<ir::BufferUse> buffers;        // slot k = buffer buffers[k].name
  std::vector<std::string> grad_buffers;     // buffers with a gradient accumulator (subset)
  int buffer_slot(const std::string& name) const;  // -1 if absent
  int scalar_slot(const std::string& name) const;
  std::vector<double> literal_values() const;
};

struct GeneratedVariant {
  std::string source;   // `struct FlexVariant { ... };` plus a comment with the source mods
  VariantLayout layout;
  // The functor's kBufferGradReduce (0 when it has none): 2 when the one learnable buffer's gradient
  // index depends on the positions only through q_idx - kv_idx, 1 when not at all (ir::position_dependence).
  int buffer_grad_reduce = 0;
  bool has_mask_mod = false;  // kHasMaskMod: a mask_mod that is not constant true
  bool has_buffer_grad = false;  // kHasBufferGrad: a learnable buffer (backward only)
  bool rel_affine = false;    // kRelAffine: score_mod = score + rel_slope(b, h) * (kv_idx - q_idx)
  int rel_gather = 0;         // kRelGather: score_mod = score + row(b, h)[+-(q_idx - kv_idx) + c] (the sign, 0: no)
  bool rel_diag = false;      // kRelDiag: score_mod = score + rel_diag(b, h, q_idx, kv_idx), a function of q_idx - kv_idx
                              // that rel_affine does not take (rel_gather's shape included)
  bool softcap = false;       // kSoftcap: score_mod = u * tanh(score * k), u and k uniform (softcap(p, u, k))
  bool softcap_approx = false;  // kSoftcapApprox: that tanh is tanh_approx (IR TanhApprox)
  bool kv_range = false;      // kKvRange: mask_mod keeps lo <= kv_idx <= hi per row (ir::kv_range, kv_range(p, b, h, q, lo, hi))
};

// Simplifies and differentiates (when with_backward) the mods and emits the functor.
// Throws flexattn::Error when a limit is exceeded or a mod is malformed.
GeneratedVariant emit_cuda_variant(const Variant& variant, bool with_backward);

}  // namespace flexattn::codegen
