// Printer of the text form; parse(print(e)) == e for every e (docs/ir_text.md has the grammar).
//
// Literal syntax (a literal node is (type, weak, value); the spelling fixes all three):
//   3, -3            weak i64 (a Python int)          2.5, 3.0, 1e-45, -0.0, inf, -inf, nan   weak f32
//   true, false      weak bool
//   3{i32}  3{i64}  2.5{f32}  -inf{f32}  true{bool}   non-weak ("strong", like a 0-d tensor)
//   3{i32, weak}                                       weak with a type its spelling would not give
//   @literal{f32}(0x7ff0000000000001)                  IEEE bits, for NaN payloads
// Floats print as the shortest decimal that reads back to the same double (std::to_chars), so
// values needing 17 digits, -0.0 and subnormals survive. A `-` written directly before a number is
// part of the literal (-3 is the literal -3, as in Python), except before `**`: -3 ** 2 is -(3**2);
// so Neg of a literal prints as -(3).
//
// Other nodes print through the spelling whose builder reproduces them exactly (the printer asks
// the builder; see text_syntax.h). A node no builder gives (made by make_node with other types,
// e.g. Cast to its own type) prints as `@op{type[, weak]}(args)`, which the parser hands to
// make_node verbatim. Non-f32 scalars and buffers carry their type: `alpha{i32}`, `bias{bf16}[h]`.
//
// Shared subexpressions are inlined while short; a shared one longer than kShareMinChars, or a
// chain deeper than kMaxInlineDepth, is bound first (`t0 = ...;`), so text size stays linear in
// the DAG size and parse nesting stays bounded.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <unordered_map>

#include "flexattn/error.h"
#include "flexattn/ir_text.h"
#include "lex.h"
#include "text_syntax.h"

namespace flexattn::ir {
namespace {

using namespace text;

constexpr size_t kShareMinChars = 40;
constexpr int kMaxInlineDepth = 48;

struct Piece {
  std::string text;
  int prec = kPrecPrimary;
};

// True when `build` gives exactly `n` (a builder that rejects its operands gives nothing).
template <typename F>
bool builds(const Node& n, F&& build) {
  try {
    return build().get() == &n;
  } catch (const std::exception&) {
    return false;
  }
}

std::string type_annotation(DType t, bool weak) {
  std::string s = "{";  // appends, not "{" + std::string: GCC 12 warns falsely (-Wrestrict) on that
  s += dtype_name(t);
  s += weak ? ", weak}" : "}";
  return s;
}

Piece literal_piece(const Node& n) {
  const double v = n.value;
  const bool spellable = !std::isnan(v) || is_canonical_nan(v);
  std::string s;
  if (n.weak && n.type == DType::Bool && (v == 0.0 || v == 1.0) && builds(n, [&] { return plain_bool_literal(v); }))
    s = v != 0.0 ? "true" : "false";
  else if (n.weak && n.type == DType::I64 && fits_i64(v) && builds(n, [&] { return plain_int_literal(v); }))
    s = int_text(v);
  else if (n.weak && n.type == DType::F32 && spellable && builds(n, [&] { return plain_float_literal(v); }))
    s = float_text(v);
  else if (spellable && annotated_literal_problem(v, n.type).empty() &&
           builds(n, [&] { return annotated_literal(v, n.type, n.weak); }))
    s = (n.type == DType::Bool ? std::string(v != 0.0 ? "true" : "false")
                               : is_int(n.type) ? int_text(v) : float_text(v)) +
        type_annotation(n.type, n.weak);
  if (s.empty()) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    char buf[32];
    std::snprintf(buf, sizeof buf, "(0x%016llx)", static_cast<unsigned long long>(bits));
    return {"@literal" + type_annotation(n.type, n.weak) + buf, kPrecPrimary};
  }
  return {s, s[0] == '-' ? kPrecUnary : kPrecPrimary};
}

class Printer {
 public:
  std::string run(const Expr& root) {
    const std::vector<const Node*> order = topo_order(root);
    std::unordered_map<const Node*, int> uses;
    for (const Node* n : order)
      for (const NodePtr& a : n->args) ++uses[a.get()];
    for (const std::string& s : scalar_names(root)) taken_.insert(s);
    for (const BufferUse& b : buffers(root)) taken_.insert(b.name);

    std::string out;
    std::unordered_map<const Node*, int> depth;
    for (const Node* n : order) {
      Piece p = render(*n);
      int d = 1;
      for (const NodePtr& a : n->args) d = std::max(d, depth[a.get()] + 1);
      const bool shared_long = uses[n] >= 2 && p.text.size() > kShareMinChars;
      if (n != root.get() && !n->args.empty() && (shared_long || d > kMaxInlineDepth)) {
        std::string name = fresh_name();
        out += name + " = " + p.text + ";\n";
        p = {name, kPrecPrimary};
        d = 1;
      }
      depth[n] = d;
      pieces_[n] = std::move(p);
    }
    return out + pieces_[root.get()].text;
  }

 private:
  std::string fresh_name() {
    for (;;) {
      std::string s = "t";
      s += std::to_string(next_id_++);
      if (!taken_.count(s)) return s;
    }
  }

  const Piece& piece(const NodePtr& a) { return pieces_.at(a.get()); }
  std::string wrap(const NodePtr& a, int min_prec) {
    const Piece& p = piece(a);
    return p.prec < min_prec ? "(" + p.text + ")" : p.text;
  }
  std::string call(std::string_view f, const Node& n, std::string prefix = "") {
    std::string s = std::string(f) + "(" + prefix;
    for (size_t i = 0; i < n.args.size(); ++i) s += (i ? ", " : "") + piece(n.args[i]).text;
    return s + ")";
  }

  Piece render(const Node& n) {
    auto arg = [&](size_t i) { return Expr(n.args[i]); };
    switch (n.op) {
      case Op::Score:
      case Op::Batch:
      case Op::Head:
      case Op::QIdx:
      case Op::KvIdx:
        if (builds(n, [&] { return input_leaf(op_name(n.op)); })) return {op_name(n.op)};
        break;
      case Op::Literal: return literal_piece(n);
      case Op::Scalar:
        if (is_identifier(n.name) && !is_reserved(n.name) && builds(n, [&] { return scalar(n.name, n.type); }))
          return {n.name + (n.type == DType::F32 ? "" : type_annotation(n.type, false))};
        break;
      case Op::Load: {
        std::vector<Expr> idx(n.args.begin(), n.args.end());
        if (is_identifier(n.name) && !is_reserved(n.name) &&
            builds(n, [&] { return load(n.name, n.buffer_dtype, idx); })) {
          std::string s = call(n.name, n);
          s[n.name.size()] = '[';
          s.back() = ']';
          if (n.buffer_dtype != DType::F32) s.insert(n.name.size(), type_annotation(n.buffer_dtype, false));
          return {s};
        }
        break;
      }
      case Op::Neg:
        if (builds(n, [&] { return unary(Op::Neg, arg(0)); })) {
          // "-3" would read back as the literal -3, "--x" is hard to read.
          const Piece& c = piece(n.args[0]);
          const bool paren = (n.args[0]->op == Op::Literal && c.text[0] != '@') || c.text[0] == '-';
          return {"-" + (paren ? "(" + c.text + ")" : wrap(n.args[0], kPrecUnary)), kPrecUnary};
        }
        break;
      case Op::Not:
        if (builds(n, [&] { return unary(Op::Not, arg(0)); })) return {"!" + wrap(n.args[0], kPrecUnary), kPrecUnary};
        break;
      case Op::Abs: case Op::Exp: case Op::Exp2: case Op::Log: case Op::Log2: case Op::Sqrt: case Op::Rsqrt:
      case Op::Tanh: case Op::TanhApprox: case Op::Sigmoid: case Op::Sin: case Op::Cos: case Op::Tan: case Op::Erf:
      case Op::Floor: case Op::Ceil: case Op::Detach:
        if (builds(n, [&] { return unary(n.op, arg(0)); })) return {call(op_name(n.op), n)};
        break;
      case Op::Cast:
        if (builds(n, [&] { return cast(arg(0), n.type); })) return {call(dtype_name(n.type), n)};
        break;
      case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::FloorDiv: case Op::Mod: case Op::Pow:
      case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: case Op::And: case Op::Or:
        if (builds(n, [&] { return binary(n.op, arg(0), arg(1)); })) {
          int prec = 0;
          const char* op = infix_spelling(n.op, &prec);
          int lmin = prec, rmin = prec + 1;  // left associative
          if (prec == kPrecCmp) lmin = rmin = kPrecAdd;  // comparisons do not associate
          if (prec == kPrecPow) lmin = kPrecPrimary, rmin = kPrecUnary;
          return {wrap(n.args[0], lmin) + " " + op + " " + wrap(n.args[1], rmin), prec};
        }
        break;
      case Op::Min:
      case Op::Max:
      case Op::BitAnd:
      case Op::BitOr:
      case Op::Shl:
      case Op::Shr:
        if (builds(n, [&] { return binary(n.op, arg(0), arg(1)); })) return {call(op_name(n.op), n)};
        break;
      case Op::Select:
        if (builds(n, [&] { return select(arg(0), arg(1), arg(2)); })) return {call("where", n)};
        break;
    }
    return raw(n);
  }

  Piece raw(const Node& n) {
    std::string head = "@";
    head += op_name(n.op);
    head += type_annotation(n.type, n.weak);
    const std::string name = is_identifier(n.name) ? n.name : quote(n.name);
    switch (n.op) {
      case Op::Literal: return literal_piece(n);  // literals always have a spelling
      case Op::Scalar: return {head + "(" + name + ")"};
      case Op::Load: {
        std::string s = head + "(" + name + type_annotation(n.buffer_dtype, false);
        for (const NodePtr& a : n.args) s += ", " + piece(a).text;
        return {s + ")"};
      }
      default:
        return {call(head, n, n.name.empty() ? "" : quote(n.name) + (n.args.empty() ? "" : ", "))};
    }
  }

  std::unordered_map<const Node*, Piece> pieces_;
  std::set<std::string> taken_;
  int next_id_ = 0;
};

}  // namespace

std::string print(const Expr& e) {
  if (e.empty()) throw Error("print: the expression is empty");
  return Printer().run(e);
}

}  // namespace flexattn::ir
