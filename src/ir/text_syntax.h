#pragma once
// What each spelling of the text form builds (docs/ir_text.md). The parser builds through these
// functions and the printer asks them whether a spelling reproduces a node, so the two cannot drift.
#include <string>
#include <string_view>

#include "flexattn/expr.h"

namespace flexattn::ir::text {

struct Function {
  enum Kind { Unary, Binary, Select, Cast };
  std::string_view name;
  Kind kind;
  Op op;     // Unary/Binary
  DType to;  // Cast
  int arity;
};
const Function* find_function(std::string_view name);
std::string function_names();  // "abs, bool, ceil, ..." for error messages

// Inputs, constants and keywords; never a scalar, buffer or binding name.
bool is_reserved(std::string_view name);
// The input leaf `name` denotes (score, b, h, q_idx, kv_idx, q, kv), or an empty Expr.
Expr input_leaf(std::string_view name);

// Literals as the unannotated spellings build them: `3` (weak i64), `2.5` (weak f32), `true`.
Expr plain_int_literal(double v);
Expr plain_float_literal(double v);
Expr plain_bool_literal(bool v);
// `3{i32}` / `3{i64, weak}`: literal(v, t, weak); "" when v fits t, else why not.
std::string annotated_literal_problem(double v, DType t);
Expr annotated_literal(double v, DType t, bool weak);
bool fits_i64(double v);

// Number spellings that lex() and parse_number() read back bit-exactly.
std::string int_text(double v);    // integral v with fits_i64(v); "-0" for -0.0
std::string float_text(double v);  // always has '.', 'e', "inf" or "nan"; NaN only if canonical
bool is_canonical_nan(double v);   // the NaN `nan` / `-nan` spell
bool parse_number(const std::string& text, double* out);  // decimal; false if out of range

// The value type of a Load from a buffer of element type t.
DType load_type(DType t);

constexpr int kPrecTernary = 1, kPrecOr = 2, kPrecAnd = 3, kPrecCmp = 4, kPrecAdd = 5, kPrecMul = 6,
              kPrecUnary = 7, kPrecPow = 8, kPrecPrimary = 9;
// Infix spelling and precedence of a binary op printed as an operator, or nullptr (a function call).
const char* infix_spelling(Op op, int* prec);

}  // namespace flexattn::ir::text
