#pragma once
// Text form of the mod IR: a C-like expression language.
//   identifiers score, b, h, q_idx, kv_idx (aliases q, kv); numbers; + - * / // % **; comparisons;
//   && || !; c ? a : b; where(c, a, b); exp, exp2, log, log2, sqrt, rsqrt, tanh, sigmoid, sin, cos,
//   floor, ceil, abs, min, max, pow; casts f32(x) i32(x) i64(x) bool(x); buffer loads name[i, j]
//   (buffer element types declared in ParseOptions, default f32); any other identifier is a named
//   runtime scalar (f32 unless declared).
// Invariant: parse(print(e)) == e (pointer-equal after hash-consing), including literal types.
#include <map>
#include <string>

#include "flexattn/expr.h"

namespace flexattn::ir {

std::string print(const Expr& e);

struct ParseOptions {
  std::map<std::string, DType> buffer_dtypes;  // element type per buffer name (default F32)
  std::map<std::string, DType> scalar_types;   // type per scalar name (default F32)
};

// Throws flexattn::Error "line L, column C: expected X, found Y" on malformed text.
Expr parse(const std::string& text, const ParseOptions& options = {});

}  // namespace flexattn::ir
