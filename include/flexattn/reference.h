#pragma once
// The CPU reference backend: the oracle every kernel is compared against.
//
// It computes torch FlexAttention's dense math (docs: shared/reference/semantics.md §3, §9) in double
// precision for inputs of any float dtype (read exactly). Differences from torch's eager reference,
// on purpose: torch works in fp32 for non-fp64 inputs and casts P to the q dtype before P·V; here
// everything stays in double, so the result is the exact answer kernels are measured against.
//
// Semantics, per (b, h, i, j) with h the *query* head:
//   s = (q_i · k_j) · scale                 scale defaults to 1/sqrt(D) (D = q head dim)
//   s' = kept(b,h,i,j) ? score_mod(s, b,h,i,j) : -inf
//   kept: without a block mask, mask_mod (absent = true). With one, the kv block of j in query block
//   row (b % B_mask, h % H_mask, i / q_block): full -> true (mask_mod skipped), partial -> mask_mod,
//   listed in neither -> false.
//   lse_i = logsumexp_j s'_ij (natural log), max_i = max_j s'_ij, P = exp(s' - lse), out = P·v.
//   A row whose s' are all -inf (fully masked) has lse = max = -inf, P = 0, out = 0: never NaN.
//   A row with an s' of +inf has lse = max = +inf and NaN out; a NaN s' gives NaN lse/max/out (both
//   as torch's logsumexp/softmax do).
//   GQA: kv head = h / (Hq / Hkv). K/V batch Bkv == B, or 1 (broadcast). q, k, v may have different
//   float dtypes (all are widened exactly to double).
//   The block mask is read from its kv-side lists only (q_* transposes are not consulted); it is
//   validated fully (sizes, counts, ids in range, partial/full disjoint, no repeats) before any use.
//   score_mod and score_grad are not called at entries that are not kept: torch evaluates them there
//   and discards the result, which is observably the same for pure mods.
// Backward (dlse may be absent = zero):
//   Δ_i = Σ_d out_i·dout_i − dlse_i,  dP = dout·vᵀ,  dS' = P ∘ (dP − Δ),
//   dS = score_grad(s, ..., dS') (dS' if absent), 0 where not kept;
//   dq = scale·dS·k, dk = scale·dSᵀ·q, dv = Pᵀ·dout, dK/dV summed over the heads of a group and, when
//   Bkv = 1, over the batch. Fully masked rows contribute nothing.
//
// Threading and determinism: work is split over (b, h, row chunks) for the forward and dq, and over
// (kv batch, kv head, column chunks) for dk/dv, so every output element is accumulated by one task in
// a fixed order: out, lse, dq, dk, dv are bitwise identical for any thread count.
// The mods are called concurrently from several threads and, in the backward, more than once per entry:
// they must be pure and thread-safe. buffer_grad is called exactly once per kept entry with its
// thread index; summing per-thread accumulators is deterministic for a fixed thread count only.
#include <cstdint>
#include <functional>
#include <limits>

#include "flexattn/block_mask.h"
#include "flexattn/tensor.h"

namespace flexattn::cpu {

// The variant as the oracle sees it. Empty functions: identity score_mod, attend everywhere.
struct ModFns {
  std::function<double(double s, int64_t b, int64_t h, int64_t q, int64_t kv)> score_mod;
  std::function<bool(int64_t b, int64_t h, int64_t q, int64_t kv)> mask_mod;
  // g · ∂score_mod/∂s at s; empty = identity (g).
  std::function<double(double s, int64_t b, int64_t h, int64_t q, int64_t kv, double g)> score_grad;
  // Receives g = dS' (the gradient wrt the score_mod output) once per kept entry; thread in
  // [0, resolve_threads(options.threads)).
  std::function<void(int thread, double s, int64_t b, int64_t h, int64_t q, int64_t kv, double g)>
      buffer_grad;
  // The thread indices buffer_grad can take (its per-thread accumulators), 0 = any. backward() refuses
  // options whose thread count exceeds it: the index would land past the accumulators.
  int buffer_grad_threads = 0;
};

struct Options {
  double scale = std::numeric_limits<double>::quiet_NaN();  // NaN = 1/sqrt(D)
  const BlockMask* block_mask = nullptr;                     // null = dense (mask_mod everywhere)
  int threads = 0;                                           // 0 = hardware concurrency
  // Backward only: the output O [B, Hq, L, Dv] that Δ = rowsum(O ∘ dO) reads, null = the exact O. The
  // backward reads the forward's stored output (semantics §9.2: torch flex saves `out` in its dtype), so
  // a low-precision backward differs from the exact one through that O at least; passing a
  // low-precision forward's O gives that baseline.
  const HostTensor* delta_out = nullptr;
};

struct ForwardResult {
  HostTensor out;        // F64 [B, Hq, L, Dv]
  HostTensor lse;        // F64 [B, Hq, L], natural log
  HostTensor max_score;  // F64 [B, Hq, L], row max of s'
};

struct BackwardResult {
  HostTensor dq, dk, dv;  // F64, shapes of q, k, v
};

// q [B, Hq, L, D], k [Bkv, Hkv, S, D], v [Bkv, Hkv, S, Dv]; any of F16/BF16/F32/F64 (may differ).
// Throws flexattn::Error naming the bad argument.
ForwardResult forward(const HostTensor& q, const HostTensor& k, const HostTensor& v, const ModFns& mods,
                      const Options& options = {});

// dout [B, Hq, L, Dv]; dlse [B, Hq, L] or null. Recomputes the forward internally.
BackwardResult backward(const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor& dout,
                        const HostTensor* dlse, const ModFns& mods, const Options& options = {});

// The number of threads a call with `threads` uses (0 -> hardware concurrency, at least 1).
int resolve_threads(int threads);

}  // namespace flexattn::cpu
