#pragma once
// The variant contract: how generated code plugs a score_mod / mask_mod into every attention kernel.
//
// A variant is a struct passed as the first template parameter of every kernel entry. It has only
// static members:
//
//   struct V {
//     static constexpr bool kHasScoreMod;   // false: score_mod/score_grad are never called (identity)
//     static constexpr bool kHasMaskMod;    // false: mask_mod is never called (attend everywhere)
//     static constexpr bool kHasBufferGrad; // true: buffer_grad is called in the backward
//     __device__ static float score_mod(const ModParams& m, float s, int b, int h, int q, int kv);
//     __device__ static bool  mask_mod (const ModParams& m, int b, int h, int q, int kv);
//     __device__ static float score_grad(const ModParams& m, float s, int b, int h, int q, int kv, float g);
//     __device__ static void  buffer_grad(const ModParams& m, float s, int b, int h, int q, int kv, float g);
//   };
//
// All four functions must exist (write a trivial body when the flag is false); they are
// __device__ __forceinline__ in practice and must be free of side effects except buffer_grad.
//
// Arguments (identical for all four):
//   s      the score AFTER scaling: (q . k) * scale, fp32 (score_mod sees it, never the raw dot).
//   b      query batch index (0 <= b < B).
//   h      QUERY head index (0 <= h < Hq), also under GQA.
//   q, kv  absolute positions, always in range: 0 <= q < L, 0 <= kv < S. Lanes past the end of a
//          tile are handed wrapped indices (q % L, kv % S) and their result is then discarded
//          (score -inf, gradient 0), so gathers such as bias[h][q - kv + S - 1] stay in bounds and a
//          mod like 1/score can never leak NaN from a padded lane.
//   g      score_grad: dL/ds' (the gradient w.r.t. the modded score); returns g * d score_mod / d s.
//          buffer_grad: the same dL/ds'; the hook adds g * d score_mod / d buf[i][idx] into
//          m.buf_grad[i] through buffer_grad_accumulate: fp32 atomics, or in deterministic mode exact ones
//          (a tagged pointer, common/exact_sum.h), so buffer gradients are bitwise reproducible there.
//
// Semantics the kernels implement around the hooks (FlexAttention, semantics.md sections 3, 9):
//   s' = (tile listed?) and (full tile or mask_mod(b,h,q,kv)) and kv < S ? score_mod(s, ...) : -inf.
//   score_mod is evaluated on masked lanes too (result discarded); mask_mod only on partial tiles.
//   The backward calls score_grad / buffer_grad only where s' is unmasked (exactly once per entry:
//   buffer_grad runs in the dK/dV kernel, never in the deterministic dQ pass).
//
// Entry points (generated source, compiled with NVRTC -std=c++17, include path = kernels/):
//
//   #include "sm80/attn_fwd_sm80.cuh"
//   #include "sm80/attn_bwd_sm80.cuh"
//   using namespace flexattn::kern;
//   struct V { ... };
//   extern "C" __global__ void __launch_bounds__(sm80_fwd_threads(128, 128), 1)
//   flexattn_fwd(const __grid_constant__ AttnParams p) { attn_fwd_sm80<V, bf16, 128, 128>(p); }
//   extern "C" __global__ void __launch_bounds__(sm80_aux_threads(), 1)
//   flexattn_bwd_preprocess(const __grid_constant__ AttnParams p) { attn_bwd_preprocess_sm80<bf16, 128, 128>(p); }
//   extern "C" __global__ void __launch_bounds__(sm80_bwd_threads(128, 128), 1)
//   flexattn_bwd(const __grid_constant__ AttnParams p) { attn_bwd_sm80<V, bf16, 128, 128>(p); }
//   extern "C" __global__ void __launch_bounds__(sm80_bwd_dq_threads(128, 128), 1)
//   flexattn_bwd_dq(const __grid_constant__ AttnParams p) { attn_bwd_dq_sm80<V, bf16, 128, 128>(p); }
//   extern "C" __global__ void __launch_bounds__(sm80_aux_threads(), 1)
//   flexattn_bwd_dq_convert(const __grid_constant__ AttnParams p) { attn_bwd_dq_convert_sm80<bf16, 128>(p); }
//
// The ", 1" (min blocks per SM) matters: with a bare __launch_bounds__(N) ptxas caps these kernels at
// 128 registers and spills (seen with nvcc 13.0 on the mask variants); with it they use up to 255.
// Launch geometry for each entry comes from sm80/tile_config.h (sm80_*_launch); shared memory above
// 48 KiB needs cudaFuncAttributeMaxDynamicSharedMemorySize. Backward order: preprocess, bwd, then
// bwd_dq_convert (deterministic == 0) or bwd_dq (deterministic != 0). __grid_constant__ keeps the
// 1.4 KiB parameter block in param space (no local copy when the mods take it by reference).
#include "common/exact_sum.h"
#include "common/numeric.cuh"
#include "common/params.h"

namespace flexattn::kern {

// The generated buffer_grad / buffer_grad_add hooks' one write: v into element `at` of buffer slot's gradient.
// A pointer with its low bit set (deterministic mode; fp32 accumulators are 4-byte aligned) is the address + 1 of
// exact accumulators, kExactWords words per element, whose sums do not depend on the order of the additions.
// Those are word-major over the buffer's elements (exact_add): word k of element `at` at k * numel + at.
__device__ __forceinline__ void buffer_grad_accumulate(const ModParams& m, int slot, long long at, float v) {
  const unsigned long long raw = reinterpret_cast<unsigned long long>(m.buf_grad[slot]);
  if ((raw & 1ull) != 0) {
    exact_add(reinterpret_cast<unsigned long long*>(raw - 1) + at, m.buf_numel[slot], v);
  } else {
    atomicAdd(m.buf_grad[slot] + at, v);
  }
}

// Index handed to a mod for a lane at position i of a dimension of length n (n >= 1).
__device__ __forceinline__ int wrap_index(int i, int n) { return i < n ? i : i % n; }

// Optional hooks: static constexpr members codegen emits only for the variants they apply to (kRelAffine,
// kSoftcap, kBufferGradReduce). FLEXATTN_VARIANT_HOOK(Name, member, T, absent) defines Name<V>::value: V::member,
// or `absent` when V has no such member (hand-written variants, older generated sources).
#define FLEXATTN_VARIANT_HOOK(Name, member, T, absent)          \
  template <class V, class = void>                              \
  struct Name {                                                 \
    static constexpr T value = absent;                          \
  };                                                            \
  template <class V>                                            \
  struct Name<V, decltype(void(V::member))> {                   \
    static constexpr T value = V::member;                       \
  };

// The identity variant: plain softmax attention (block mask still honoured).
struct IdentityVariant {
  static constexpr bool kHasScoreMod = false;
  static constexpr bool kHasMaskMod = false;
  static constexpr bool kHasBufferGrad = false;
  __device__ static float score_mod(const ModParams&, float s, int, int, int, int) { return s; }
  __device__ static bool mask_mod(const ModParams&, int, int, int, int) { return true; }
  __device__ static float score_grad(const ModParams&, float, int, int, int, int, float g) { return g; }
  __device__ static void buffer_grad(const ModParams&, float, int, int, int, int, float) {}
};

}  // namespace flexattn::kern
