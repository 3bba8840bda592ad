// Score mods of the library. Definitions and their sources are documented in include/flexattn/mods.h.
#include <cmath>
#include <string>

#include "flexattn/error.h"
#include "flexattn/mods.h"

namespace flexattn::mods {

using ir::Expr;

namespace {

void check_float_buffer(const ir::Buffer& b, const std::string& who) {
  check(b.dtype == DType::F32 || b.dtype == DType::F16 || b.dtype == DType::BF16,
        who + ": buffer '" + b.name + "' has dtype " + std::string(dtype_name(b.dtype)) +
            ", expected a float buffer (f32, f16 or bf16)");
}

}  // namespace

Expr alibi(const std::string& heads_scalar) {
  check(!heads_scalar.empty(), "alibi: the head-count scalar needs a name");
  Expr num_heads = ir::scalar(heads_scalar, DType::I32);
  Expr slope = ir::exp2(-((ir::head() + 1) * 8.0 / num_heads));
  return ir::score() + (ir::kv_idx() - ir::q_idx()) * slope;
}

Expr alibi(const ir::Buffer& slopes) {
  check_float_buffer(slopes, "alibi");
  return ir::score() + (ir::kv_idx() - ir::q_idx()) * slopes(ir::head());
}

Expr softcap(double cap, bool approx) {
  check(std::isfinite(cap) && cap > 0, "softcap: cap must be a finite number > 0, got " + std::to_string(cap));
  const Expr x = ir::score() / Expr(cap);
  return Expr(cap) * (approx ? ir::tanh_approx(x) : ir::tanh(x));
}

Expr relative_bias(const ir::Buffer& bias, const std::string& kv_len_scalar) {
  check_float_buffer(bias, "relative_bias");
  check(!kv_len_scalar.empty(), "relative_bias: the kv-length scalar needs a name");
  Expr kv_len = ir::scalar(kv_len_scalar, DType::I32);
  return ir::score() + bias(ir::head(), ir::q_idx() - ir::kv_idx() + kv_len - 1);
}

Expr t5_bucket(int64_t num_buckets, int64_t max_distance, bool bidirectional) {
  const int64_t half_n = bidirectional ? num_buckets / 2 : num_buckets;
  const int64_t max_exact_n = half_n / 2;
  check(max_exact_n >= 1, "t5_bucket: num_buckets must be >= " + std::string(bidirectional ? "4" : "2") +
                              ", got " + std::to_string(num_buckets));
  check(max_distance > max_exact_n, "t5_bucket: max_distance must be > " + std::to_string(max_exact_n) +
                                        " (num_buckets / " + (bidirectional ? "4" : "2") + "), got " +
                                        std::to_string(max_distance));
  Expr rel = ir::kv_idx() - ir::q_idx();  // HF: memory_position - context_position
  Expr buckets = Expr(num_buckets);
  Expr half = bidirectional ? ir::floordiv(buckets, 2) : buckets;
  Expr base = bidirectional ? ir::where(rel > 0, half, Expr(0)) : Expr(0);
  Expr n = bidirectional ? ir::abs(rel) : ir::maximum(-rel, Expr(0));
  Expr max_exact = ir::floordiv(half, 2);
  // The large branch is discarded where n < max_exact; clamping its log argument to >= 1 there keeps it
  // finite, so no -inf ever reaches the float -> int cast.
  Expr nf = ir::cast(ir::maximum(n, max_exact), DType::F32);
  Expr ratio = ir::log2(nf / max_exact) / ir::log2(Expr(max_distance) / max_exact);
  Expr large = max_exact + ir::cast(ratio * (half - max_exact), DType::I32);
  large = ir::minimum(large, half - 1);
  Expr bucket = base + ir::where(n < max_exact, n, large);
  return bucket.type() == DType::I32 ? bucket : ir::cast(bucket, DType::I32);
}

Expr t5_bias(const ir::Buffer& bias, int64_t num_buckets, int64_t max_distance, bool bidirectional) {
  check_float_buffer(bias, "t5_bias");
  return ir::score() + bias(ir::head(), t5_bucket(num_buckets, max_distance, bidirectional));
}

}  // namespace flexattn::mods
