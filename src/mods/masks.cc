// Mask mods of the library. Definitions and their sources are documented in include/flexattn/mods.h.
#include <algorithm>
#include <string>

#include "flexattn/error.h"
#include "flexattn/mods.h"

namespace flexattn::mods {

using ir::Expr;

namespace {

// Expr has both a member operator== (bool: structural identity) and the free one building an Eq node;
// naming the node avoids depending on overload resolution between the two.
Expr eq(const Expr& a, const Expr& b) { return ir::binary(ir::Op::Eq, a, b); }

void check_bool(const Expr& m, const std::string& who, size_t index) {
  check(!m.empty(), who + ": operand " + std::to_string(index) + " is empty, expected a bool mask expression");
  check(m.type() == DType::Bool, who + ": operand " + std::to_string(index) + " has type " +
                                     std::string(dtype_name(m.type())) + ", expected a bool mask expression");
}

// Positions are below 2^31, so every argument from 2^32 up gives the same mask as 2^32 (a window or prefix
// beyond every distance, one chunk, a stride no distance reaches). Saturating keeps the literal exact (it
// travels as a double) and in range; arguments beyond 2^31 widen the index arithmetic to i64 (expr.cc), those
// below keep it in i32.
Expr position_bound(int64_t v) { return Expr(std::min<int64_t>(v, int64_t(1) << 32)); }

}  // namespace

Expr full() { return Expr(true); }

Expr causal() { return ir::q_idx() >= ir::kv_idx(); }

Expr sliding_window(int64_t window) {
  check(window >= 0, "sliding_window: window must be >= 0, got " + std::to_string(window));
  return causal() & (ir::q_idx() - ir::kv_idx() <= position_bound(window));
}

Expr prefix_lm(int64_t prefix) {
  check(prefix >= 0, "prefix_lm: prefix length must be >= 0, got " + std::to_string(prefix));
  return (ir::kv_idx() < position_bound(prefix)) | causal();
}

Expr document(const ir::Buffer& doc_ids) {
  check(is_int(doc_ids.dtype), "document: buffer '" + doc_ids.name + "' has dtype " +
                                   std::string(dtype_name(doc_ids.dtype)) + ", expected i32 or i64 document ids");
  return eq(doc_ids(ir::q_idx()), doc_ids(ir::kv_idx()));
}

Expr chunked(int64_t chunk) {
  check(chunk >= 1, "chunked: chunk size must be >= 1, got " + std::to_string(chunk));
  return eq(ir::floordiv(ir::q_idx(), position_bound(chunk)), ir::floordiv(ir::kv_idx(), position_bound(chunk)));
}

Expr dilated(int64_t stride) {
  check(stride >= 1, "dilated: stride must be >= 1, got " + std::to_string(stride));
  return causal() & eq(ir::mod(ir::q_idx() - ir::kv_idx(), position_bound(stride)), Expr(0));
}

Expr and_masks(const std::vector<Expr>& masks) {
  if (masks.empty()) return full();
  for (size_t i = 0; i < masks.size(); ++i) check_bool(masks[i], "and_masks", i);
  Expr r = masks[0];
  for (size_t i = 1; i < masks.size(); ++i) r = r & masks[i];
  return r;
}

Expr or_masks(const std::vector<Expr>& masks) {
  if (masks.empty()) return Expr(false);
  for (size_t i = 0; i < masks.size(); ++i) check_bool(masks[i], "or_masks", i);
  Expr r = masks[0];
  for (size_t i = 1; i < masks.size(); ++i) r = r | masks[i];
  return r;
}

Expr not_mask(const Expr& mask) {
  check_bool(mask, "not_mask", 0);
  return !mask;
}

}  // namespace flexattn::mods
