#include "text_syntax.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

namespace flexattn::ir::text {
namespace {

constexpr Function kFunctions[] = {
    {"abs", Function::Unary, Op::Abs, DType::F32, 1},
    {"bitwise_and", Function::Binary, Op::BitAnd, DType::I64, 2},
    {"bitwise_left_shift", Function::Binary, Op::Shl, DType::I64, 2},
    {"bitwise_or", Function::Binary, Op::BitOr, DType::I64, 2},
    {"bitwise_right_shift", Function::Binary, Op::Shr, DType::I64, 2},
    {"bool", Function::Cast, Op::Cast, DType::Bool, 1},
    {"ceil", Function::Unary, Op::Ceil, DType::F32, 1},
    {"cos", Function::Unary, Op::Cos, DType::F32, 1},
    {"detach", Function::Unary, Op::Detach, DType::F32, 1},
    {"erf", Function::Unary, Op::Erf, DType::F32, 1},
    {"exp", Function::Unary, Op::Exp, DType::F32, 1},
    {"exp2", Function::Unary, Op::Exp2, DType::F32, 1},
    {"f32", Function::Cast, Op::Cast, DType::F32, 1},
    {"float", Function::Cast, Op::Cast, DType::F32, 1},
    {"floor", Function::Unary, Op::Floor, DType::F32, 1},
    {"i32", Function::Cast, Op::Cast, DType::I32, 1},
    {"i64", Function::Cast, Op::Cast, DType::I64, 1},
    {"int", Function::Cast, Op::Cast, DType::I32, 1},  // torch Tensor.int() is int32
    {"log", Function::Unary, Op::Log, DType::F32, 1},
    {"log2", Function::Unary, Op::Log2, DType::F32, 1},
    {"max", Function::Binary, Op::Max, DType::F32, 2},
    {"maximum", Function::Binary, Op::Max, DType::F32, 2},
    {"min", Function::Binary, Op::Min, DType::F32, 2},
    {"minimum", Function::Binary, Op::Min, DType::F32, 2},
    {"neg", Function::Unary, Op::Neg, DType::F32, 1},
    {"pow", Function::Binary, Op::Pow, DType::F32, 2},
    {"rsqrt", Function::Unary, Op::Rsqrt, DType::F32, 1},
    {"sigmoid", Function::Unary, Op::Sigmoid, DType::F32, 1},
    {"sin", Function::Unary, Op::Sin, DType::F32, 1},
    {"sqrt", Function::Unary, Op::Sqrt, DType::F32, 1},
    {"tan", Function::Unary, Op::Tan, DType::F32, 1},
    {"tanh", Function::Unary, Op::Tanh, DType::F32, 1},
    {"tanh_approx", Function::Unary, Op::TanhApprox, DType::F32, 1},
    {"where", Function::Select, Op::Select, DType::F32, 3},
};

constexpr std::string_view kReserved[] = {"score", "b",   "h",    "q_idx", "kv_idx", "q",   "kv",
                                          "inf",   "nan", "true", "false", "and",    "or",  "not"};

constexpr double kTwo63 = 9223372036854775808.0;

uint64_t bits_of(double v) {
  uint64_t u;
  std::memcpy(&u, &v, 8);
  return u;
}

}  // namespace

const Function* find_function(std::string_view name) {
  for (const Function& f : kFunctions)
    if (f.name == name) return &f;
  return nullptr;
}

std::string function_names() {
  std::string s;
  for (const Function& f : kFunctions) s += (s.empty() ? "" : ", ") + std::string(f.name);
  return s;
}

bool is_reserved(std::string_view name) {
  for (std::string_view r : kReserved)
    if (r == name) return true;
  return false;
}

Expr input_leaf(std::string_view name) {
  if (name == "score") return score();
  if (name == "b") return batch();
  if (name == "h") return head();
  if (name == "q_idx" || name == "q") return q_idx();
  if (name == "kv_idx" || name == "kv") return kv_idx();
  return Expr();
}

Expr plain_int_literal(double v) { return literal(v, DType::I64, true); }
Expr plain_float_literal(double v) { return literal(v, DType::F32, true); }
Expr plain_bool_literal(bool v) { return literal(v ? 1.0 : 0.0, DType::Bool, true); }

bool fits_i64(double v) { return std::trunc(v) == v && v >= -kTwo63 && v < kTwo63; }

std::string annotated_literal_problem(double v, DType t) {
  switch (t) {
    case DType::Bool:
      if (v != 0.0 && v != 1.0) return "expected 0, 1, true or false for a bool literal";
      return "";
    case DType::I32:
      if (std::trunc(v) != v || v < -2147483648.0 || v > 2147483647.0)
        return "expected an integer in the range of i32";
      return "";
    case DType::I64:
      if (!fits_i64(v)) return "expected an integer in the range of i64";
      return "";
    case DType::F32: return "";
    default: return "expected a literal type bool, i32, i64 or f32, found " + std::string(dtype_name(t));
  }
}

Expr annotated_literal(double v, DType t, bool weak) { return literal(v, t, weak); }

std::string int_text(double v) {
  if (v == 0.0 && std::signbit(v)) return "-0";
  if (v == -kTwo63) return "-9223372036854775808";
  return std::to_string(int64_t(v));
}

bool is_canonical_nan(double v) {
  return std::isnan(v) && (bits_of(v) & ~(uint64_t(1) << 63)) == bits_of(std::numeric_limits<double>::quiet_NaN());
}

std::string float_text(double v) {
  if (std::isnan(v)) return std::signbit(v) ? "-nan" : "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest text that reads back bit-exactly
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

bool parse_number(const std::string& text, double* out) {
  auto r = std::from_chars(text.data(), text.data() + text.size(), *out);
  return r.ec == std::errc() && r.ptr == text.data() + text.size();
}

DType load_type(DType t) { return is_float(t) ? DType::F32 : t; }

const char* infix_spelling(Op op, int* prec) {
  switch (op) {
    case Op::Add: *prec = kPrecAdd; return "+";
    case Op::Sub: *prec = kPrecAdd; return "-";
    case Op::Mul: *prec = kPrecMul; return "*";
    case Op::Div: *prec = kPrecMul; return "/";
    case Op::FloorDiv: *prec = kPrecMul; return "//";
    case Op::Mod: *prec = kPrecMul; return "%";
    case Op::Pow: *prec = kPrecPow; return "**";
    case Op::Eq: *prec = kPrecCmp; return "==";
    case Op::Ne: *prec = kPrecCmp; return "!=";
    case Op::Lt: *prec = kPrecCmp; return "<";
    case Op::Le: *prec = kPrecCmp; return "<=";
    case Op::Gt: *prec = kPrecCmp; return ">";
    case Op::Ge: *prec = kPrecCmp; return ">=";
    case Op::And: *prec = kPrecAnd; return "&&";
    case Op::Or: *prec = kPrecOr; return "||";
    default: return nullptr;
  }
}

}  // namespace flexattn::ir::text
