#pragma once
// The mod library: the common FlexAttention masks and score mods as IR builders, plus a registry that
// maps "NAME[:ARGS]" strings (the CLI's --mask / --score values) to a mod with the buffers and scalars
// it needs.
//
// Conventions:
//  - Every number given to a builder (window, chunk, cap, ...) becomes a literal of the expression,
//    i.e. a runtime parameter: sliding_window(128) and sliding_window(256) share one compiled kernel.
//  - Values that depend on the call (number of heads, sequence length) are named scalars, bound per call.
//  - Definitions follow attention-gym (pytorch-labs/attention-gym), the de-facto reference for these mods;
//    where it has none, the comment states the formula.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "flexattn/expr.h"
#include "flexattn/tensor.h"

namespace flexattn::mods {

// ---- mask mods (return Bool) ----------------------------------------------------------------------

// Attend everywhere (torch noop_mask).
ir::Expr full();
// q_idx >= kv_idx.
ir::Expr causal();
// attention-gym generate_sliding_window: causal && q_idx - kv_idx <= window, so each query sees
// window + 1 keys (itself and `window` before it). window >= 0.
ir::Expr sliding_window(int64_t window);
// attention-gym generate_prefix_lm_mask: kv_idx < prefix || causal (full attention to the first
// `prefix` keys, causal elsewhere). prefix >= 0.
ir::Expr prefix_lm(int64_t prefix);
// doc_ids[q_idx] == doc_ids[kv_idx]: packed documents attend within themselves (semantics.md §12).
// doc_ids: an I32 or I64 buffer of rank 1 (throws flexattn::Error otherwise).
ir::Expr document(const ir::Buffer& doc_ids);
// Local attention within chunks, not causal: q_idx // chunk == kv_idx // chunk. chunk >= 1.
// (Llama-4-style chunked attention is and_masks({chunked(c), causal()}).)
ir::Expr chunked(int64_t chunk);
// Dilated causal attention: causal && (q_idx - kv_idx) % stride == 0. stride >= 1.
// (The four numbers above are taken as min(n, 2^32), the same mask as any larger n since positions are below 2^31;
// from 2^31 up the index arithmetic is 64-bit.)
ir::Expr dilated(int64_t stride);

// torch and_masks / or_masks: AND from true, OR from false (so and_masks({}) == full()).
// Every operand must be a Bool expression (throws flexattn::Error naming the operand otherwise).
ir::Expr and_masks(const std::vector<ir::Expr>& masks);
ir::Expr or_masks(const std::vector<ir::Expr>& masks);
ir::Expr not_mask(const ir::Expr& mask);

// ---- score mods (return F32) ----------------------------------------------------------------------

// attention-gym generate_alibi_bias: score + (kv_idx - q_idx) * exp2(-((h + 1) * 8.0 / H)), the
// standard ALiBi slopes 2^(-8 (h + 1) / H) for a power-of-two head count. H is the named I32 scalar
// `heads_scalar`, bound per call to the number of query heads.
ir::Expr alibi(const std::string& heads_scalar = "H");
// The same with the slopes read from a rank-1 float buffer: score + (kv_idx - q_idx) * slopes[h].
ir::Expr alibi(const ir::Buffer& slopes);
// Gemma-2 / Grok tanh soft-capping: cap * tanh(score / cap). cap > 0. approx: tanh_approx instead of tanh (the GPU's
// tanh.approx.f32, as attention-gym's softcap with approx=True: scores move by up to ~cap * 2^-11; on the sm90
// forward one MUFU op per entry fewer).
ir::Expr softcap(double cap, bool approx = false);
// Learned relative-position bias: score + bias[h, q_idx - kv_idx + S - 1], where S is the named I32
// scalar `kv_len_scalar` (bound to the KV length), so bias has shape [H, Q_LEN + KV_LEN - 1] and
// column S - 1 is distance 0. bias: a rank-2 float buffer.
ir::Expr relative_bias(const ir::Buffer& bias, const std::string& kv_len_scalar = "S");
// T5 bucketed relative bias: score + bias[h, t5_bucket(kv_idx - q_idx)], bias of shape [H, num_buckets].
ir::Expr t5_bias(const ir::Buffer& bias, int64_t num_buckets, int64_t max_distance, bool bidirectional);
// The bucket function of HF transformers' T5Attention._relative_position_bucket for
// relative_position = kv_idx - q_idx, as an I32 expression. num_buckets and max_distance are literals
// and every derived constant (num_buckets // 2, ...) is computed in the expression from them, so two
// configurations share one kernel. The log ratio is written with log2 instead of log (the same value
// mathematically) because log2 is exact at powers of two, which keeps the bucket edges at distances
// max_exact * 2^k exact in both f32 and double. Requires num_buckets >= 2 (>= 4 when bidirectional)
// and max_distance > max_exact (throws flexattn::Error otherwise).
ir::Expr t5_bucket(int64_t num_buckets, int64_t max_distance, bool bidirectional);

// ---- registry ---------------------------------------------------------------------------------------

// The problem a registry mod is instantiated for; buffers and scalars are sized/valued from it.
struct ProblemShape {
  int64_t B = 1, H = 1, Hkv = 1, Q = 1, KV = 1, D = 16, Dv = 16;
  uint64_t seed = 0;
};

struct BufferSpec {
  std::string name;
  DType dtype = DType::F32;
  std::string shape_doc;  // e.g. "[H, Q + KV - 1]"
  bool trainable = false; // its gradient is wanted in the backward (Variant::grad_buffers)
  std::function<HostTensor(const ProblemShape&)> make;
};

struct ScalarSpec {
  std::string name;
  DType type = DType::I32;
  std::string doc;  // e.g. "number of query heads"
  std::function<double(const ProblemShape&)> value;
};

struct ModSpec {
  std::string name;     // the spec as looked up, e.g. "sliding_window:256"
  bool is_mask = true;  // mask mod (Bool) or score mod (F32)
  ir::Expr expr;
  std::vector<BufferSpec> buffers;
  std::vector<ScalarSpec> scalars;
};

struct RegistryEntry {
  std::string name;    // "sliding_window"
  std::string syntax;  // "sliding_window:W"
  bool is_mask;
  std::string doc;     // one line
};
const std::vector<RegistryEntry>& registry();

// Looks up "NAME[:ARG[:ARG]]". Throws flexattn::Error for an unknown name (listing every known name), a
// wrong number of arguments or a malformed / out-of-range argument (naming the mod and what it expects).
ModSpec lookup(const std::string& spec);
// As lookup, and also checks the kind: a score mod given to lookup_mask (or the reverse) is an error.
ModSpec lookup_mask(const std::string& spec);
ModSpec lookup_score(const std::string& spec);

// Fills t (any dtype) with N(0, stddev^2) values from a deterministic generator (splitmix64 +
// Box-Muller), rounded to t's dtype. The same seed gives the same values (up to the last bit of the
// platform's libm log/cos).
void fill_normal(HostTensor* t, uint64_t seed, double stddev = 1.0);

}  // namespace flexattn::mods
