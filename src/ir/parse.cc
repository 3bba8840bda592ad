// Recursive-descent parser of the text form (grammar in docs/ir_text.md). Every node is built
// through the typed builders (so torch promotion applies) except `@op{...}(...)`, which is
// make_node verbatim. Builder errors are re-thrown with the position of the operator.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>

#include "flexattn/error.h"
#include "flexattn/ir_text.h"
#include "lex.h"
#include "text_syntax.h"

namespace flexattn::ir {
namespace {

using text::Token;
using text::TokKind;

// A level (an operand, a prefix operator, a '?:' branch or '**' exponent) costs up to 8 stack frames; 258 levels fit
// in 256 KiB of stack in a release build and 3 MiB under ASan (measured at 256). A parenthesis is two levels (its
// operand and the expression inside), so the limit reads as 128 parentheses (it said "256 levels" and failed at
// 128 parentheses). print() keeps its output under ~150 levels.
constexpr int kMaxParens = 128;
constexpr int kMaxDepth = 2 * kMaxParens + 2;

struct Annotation {
  DType type = DType::F32;
  bool weak = false;
};

class Parser {
 public:
  Parser(std::vector<Token> toks, const ParseOptions& opt) : t_(std::move(toks)), opt_(opt) {}

  Expr program() {
    while (peek().kind == TokKind::Ident && peek(1).is("=")) binding();
    Expr e = ternary();
    accept(";");
    expect_kind_end();
    return e;
  }

 private:
  // ---- token helpers ----
  const Token& peek(size_t k = 0) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = t_[p_];
    if (p_ + 1 < t_.size()) ++p_;
    return t;
  }
  bool accept(std::string_view punct) {
    if (!peek().is(punct)) return false;
    next();
    return true;
  }
  const Token& expect(std::string_view punct) {
    if (!peek().is(punct)) fail_expected("'" + std::string(punct) + "'");
    return next();
  }
  void expect_kind_end() {
    if (peek().kind != TokKind::End) fail_expected("end of input");
  }
  [[noreturn]] void fail_expected(const std::string& what) {
    text::fail_at(peek(), "expected " + what + ", found " + text::describe(peek()));
  }

  // Runs a builder and re-throws its Error at `at`.
  template <typename F>
  Expr build(const Token& at, F&& f) {
    try {
      return f();
    } catch (const Error& e) {
      text::fail_at(at, e.what());
    }
  }

  // `&` / `|` between a bool and an integer: the text form gives them the logical operators' precedence, so
  // `q_idx & 1 == 0` reads as q_idx & (1 == 0), where Python (and a torch mod) means (q_idx & 1) == 0. Refused
  // rather than silently bitwise.
  static void check_bitwise_operands(const Token& at, const Expr& l, const Expr& r) {
    const bool lb = l.type() == DType::Bool, rb = r.type() == DType::Bool;
    if (lb != rb && (is_int(l.type()) || is_int(r.type())))
      text::fail_at(at, "'" + std::string(at.text) + "' between a bool and an integer: the text form gives it the "
                        "precedence of '&&' / '||', so parenthesize the bitwise part, e.g. (q_idx & 1) == 0");
    if (!(lb && rb) && !(is_int(l.type()) && is_int(r.type())))  // (the node's own error named 'and' / 'or')
      text::fail_at(at, "'" + std::string(at.text) + "' expects two bools (logical) or two integers (bitwise), got " +
                            std::string(dtype_name(l.type())) + " and " + std::string(dtype_name(r.type())));
  }

  struct Depth {
    Parser& p;
    Depth(Parser& parser, const Token& at) : p(parser) {
      if (++p.depth_ > kMaxDepth)
        text::fail_at(at, "expected at most " + std::to_string(kMaxParens) +
                              " levels of nesting (parentheses; a prefix operator, '?:' branch or '**' exponent "
                              "counts half a level), found more");
    }
    ~Depth() { --p.depth_; }
  };

  // ---- statements ----
  void binding() {
    const Token& name = next();
    next();  // '='
    if (text::is_reserved(name.text))
      text::fail_at(name, "expected a binding name, found reserved name '" + name.text + "'");
    if (auto it = bound_at_.find(name.text); it != bound_at_.end())
      text::fail_at(name, "'" + name.text + "' is already bound at line " + std::to_string(it->second.line) +
                              ", column " + std::to_string(it->second.column));
    Expr e = ternary();
    expect(";");
    bindings_[name.text] = e;
    bound_at_[name.text] = name;
  }

  // ---- expressions, lowest precedence first ----
  Expr ternary() {
    Depth d(*this, peek());
    Expr c = logical_or();
    if (!peek().is("?")) return c;
    const Token& q = next();
    Expr a = ternary();
    expect(":");
    Expr b = ternary();
    return build(q, [&] { return select(c, a, b); });
  }

  Expr logical_or() {
    Expr l = logical_and();
    while (peek().is("||") || peek().is("|") || peek().is_ident("or")) {
      const Token& op = next();
      Expr r = logical_and();
      // `|` as torch's: bitwise on integers (operator|), logical on bools; `||` and `or` logical only.
      if (op.is("|")) check_bitwise_operands(op, l, r);
      l = build(op, [&] { return op.is("|") ? l | r : binary(Op::Or, l, r); });
    }
    return l;
  }

  Expr logical_and() {
    Expr l = comparison();
    while (peek().is("&&") || peek().is("&") || peek().is_ident("and")) {
      const Token& op = next();
      Expr r = comparison();
      if (op.is("&")) check_bitwise_operands(op, l, r);
      l = build(op, [&] { return op.is("&") ? l & r : binary(Op::And, l, r); });
    }
    return l;
  }

  static bool comparison_op(const Token& t, Op* op) {
    static const std::pair<std::string_view, Op> kOps[] = {{"==", Op::Eq}, {"!=", Op::Ne}, {"<", Op::Lt},
                                                           {"<=", Op::Le}, {">", Op::Gt},  {">=", Op::Ge}};
    for (const auto& [s, o] : kOps)
      if (t.is(s)) {
        *op = o;
        return true;
      }
    return false;
  }

  // Comparisons do not associate: C reads `a < b < c` as `(a < b) < c`, Python as a chain, so
  // the text form refuses it rather than pick one silently.
  Expr comparison() {
    Expr l = additive();
    Op op;
    if (!comparison_op(peek(), &op)) return l;
    const Token& t = next();
    Expr r = additive();
    l = build(t, [&] { return binary(op, l, r); });
    if (comparison_op(peek(), &op))
      text::fail_at(peek(), "expected an operator other than a comparison, found " + text::describe(peek()) +
                                " (chained comparisons are ambiguous: add parentheses)");
    return l;
  }

  Expr additive() {
    Expr l = multiplicative();
    while (peek().is("+") || peek().is("-")) {
      const Token& t = next();
      const Op op = t.text == "+" ? Op::Add : Op::Sub;
      Expr r = multiplicative();
      l = build(t, [&] { return binary(op, l, r); });
    }
    return l;
  }

  Expr multiplicative() {
    Expr l = unary_expr();
    for (;;) {
      Op op;
      if (peek().is("*")) op = Op::Mul;
      else if (peek().is("/")) op = Op::Div;
      else if (peek().is("//")) op = Op::FloorDiv;
      else if (peek().is("%")) op = Op::Mod;
      else return l;
      const Token& t = next();
      Expr r = unary_expr();
      l = build(t, [&] { return binary(op, l, r); });
    }
  }

  bool is_number_literal(const Token& t) const {
    return t.kind == TokKind::Number || t.is_ident("inf") || t.is_ident("nan");
  }

  // `-` directly before a number is part of the literal (as Python folds -3 to a constant),
  // unless the number is the base of `**`: -3 ** 2 is -(3 ** 2).
  bool negative_literal_follows() const {
    if (!is_number_literal(peek(1))) return false;
    size_t k = 2;
    if (peek(k).is("{"))
      while (peek(k).kind != TokKind::End && !peek(k).is("}")) ++k;
    if (peek(k).is("}")) ++k;
    const Token& after = peek(k);
    return !(after.is("**") || (peek(1).kind == TokKind::Ident && (after.is("(") || after.is("["))));
  }

  Expr unary_expr() {
    Depth d(*this, peek());
    if (peek().is("-")) {
      if (negative_literal_follows()) {
        next();
        return number_literal(/*negate=*/true);
      }
      const Token& t = next();
      Expr a = unary_expr();
      return build(t, [&] { return unary(Op::Neg, a); });
    }
    if (peek().is("!") || peek().is("~") || peek().is_ident("not")) {
      const Token& t = next();
      Expr a = unary_expr();
      // `~` as torch's and the C++ builder's: bitwise on an integer (-x - 1), logical on a bool; `!` / `not` logical
      return build(t, [&] { return t.is("~") ? ~a : unary(Op::Not, a); });
    }
    Expr base = primary();
    if (!peek().is("**")) return base;
    const Token& t = next();
    Expr e = unary_expr();  // right associative; the exponent may carry a sign: x ** -2
    return build(t, [&] { return binary(Op::Pow, base, e); });
  }

  Expr primary() {
    const Token& t = peek();
    if (t.is("(")) {
      next();
      Expr e = ternary();
      expect(")");
      return e;
    }
    if (t.is("@")) return raw_node();
    if (is_number_literal(t) && !peek(1).is("(") && !peek(1).is("[")) return number_literal(false);
    if (t.is_ident("true") || t.is_ident("false")) return bool_literal();
    if (t.kind != TokKind::Ident || t.is_ident("and") || t.is_ident("or") || t.is_ident("not"))
      fail_expected("an expression");
    if (peek(1).is("(")) return call();
    if (text::is_reserved(t.text)) {
      if (peek(1).is("[")) text::fail_at(t, "expected a buffer name before '[', found reserved name '" + t.text + "'");
      if (peek(1).is("{"))
        text::fail_at(peek(1), "expected an operator after '" + t.text +
                                   "', found '{' (type annotations apply to numbers, scalars and buffers)");
      next();
      return text::input_leaf(t.text);
    }
    return named();
  }

  // A scalar `alpha`, `alpha{i32}`, a binding, or a load `bias[i, j]`, `bias{bf16}[i, j]`.
  Expr named() {
    const Token& name = next();
    const bool annotated = peek().is("{");
    DType dtype = DType::F32;
    if (annotated) dtype = annotation(/*allow_weak=*/false).type;
    if (peek().is("[")) {
      const Token& open = next();
      std::vector<Expr> idx = list("]");
      if (idx.empty() || idx.size() > 4)
        text::fail_at(open, "buffer '" + name.text + "' takes 1 to 4 indices, got " + std::to_string(idx.size()));
      dtype = declared(name, annotated, dtype, opt_.buffer_dtypes, "buffer");
      return build(name, [&] { return load(name.text, dtype, idx); });
    }
    if (!annotated)
      if (auto it = bindings_.find(name.text); it != bindings_.end()) return it->second;
    dtype = declared(name, annotated, dtype, opt_.scalar_types, "scalar");
    return build(name, [&] { return scalar(name.text, dtype); });
  }

  DType declared(const Token& name, bool annotated, DType annotated_type, const std::map<std::string, DType>& decl,
                 const char* kind) {
    auto it = decl.find(name.text);
    if (it == decl.end()) return annotated_type;
    if (annotated && it->second != annotated_type)
      text::fail_at(name, std::string(kind) + " '" + name.text + "' is annotated " +
                              std::string(dtype_name(annotated_type)) + " here but ParseOptions declares it " +
                              std::string(dtype_name(it->second)));
    return it->second;
  }

  // Comma-separated expressions up to `close` (consumed).
  std::vector<Expr> list(std::string_view close) {
    std::vector<Expr> out;
    if (accept(close)) return out;
    for (;;) {
      out.push_back(ternary());
      if (accept(close)) return out;
      if (!peek().is(",")) fail_expected("',' or '" + std::string(close) + "'");
      next();
    }
  }

  Expr call() {
    const Token& name = next();
    next();  // '('
    std::vector<Expr> args = list(")");
    const text::Function* f = text::find_function(name.text);
    if (!f)
      text::fail_at(name, "expected a function (" + text::function_names() + "), found unknown function '" +
                              name.text + "'");
    if (int(args.size()) != f->arity)
      text::fail_at(name, "function '" + name.text + "' takes " + std::to_string(f->arity) + " argument" +
                              (f->arity == 1 ? "" : "s") + ", got " + std::to_string(args.size()));
    return build(name, [&]() -> Expr {
      switch (f->kind) {
        case text::Function::Unary: return unary(f->op, args[0]);
        case text::Function::Binary: return binary(f->op, args[0], args[1]);
        case text::Function::Select: return select(args[0], args[1], args[2]);
        case text::Function::Cast: return cast(args[0], f->to);
      }
      return Expr();
    });
  }

  // `{dtype}` or `{dtype, weak}`.
  Annotation annotation(bool allow_weak) {
    expect("{");
    Annotation a;
    const Token& t = peek();
    if (t.kind != TokKind::Ident || !parse_dtype(t.text, &a.type)) fail_expected("a dtype (bool, i32, i64, f32, ...)");
    next();
    if (accept(",")) {
      if (!allow_weak || !peek().is_ident("weak")) fail_expected(allow_weak ? "'weak'" : "'}'");
      next();
      a.weak = true;
    }
    expect("}");
    return a;
  }

  // Whether an integer token's digits are exactly the double v they were read as (literals hold doubles:
  // 9007199254740993 would be read as ...992 without a word). Compared as decimal text, so any size is checked: past
  // 2^63 a value was taken as exact, and -9223372036854775809 then rounded to -2^63, which fits i64, silently.
  static bool exact_integer(const std::string& digits, double v) {
    char buf[400];  // %.0f of a finite double prints its exact integer value (at most 309 digits)
    std::snprintf(buf, sizeof buf, "%.0f", std::fabs(v));
    const size_t first = digits.find_first_not_of('0');
    return std::string(buf) == (first == std::string::npos ? std::string("0") : digits.substr(first));
  }

  // Whether the integer the digits spell (negated when negate) lies in i64, read from the text: the double they round
  // to cannot tell -9223372036854775809 from -2^63.
  static bool digits_fit_i64(const std::string& digits, bool negate) {
    const size_t first = digits.find_first_not_of('0');
    if (first == std::string::npos) return true;
    const std::string d = digits.substr(first), limit = negate ? "9223372036854775808" : "9223372036854775807";
    return d.size() < limit.size() || (d.size() == limit.size() && d <= limit);
  }

  // Reads a number/inf/nan token (with its sign already consumed when negate) and returns its value.
  double number_value(bool negate) {
    const Token& t = next();
    double v = 0.0;
    if (t.is_ident("inf")) v = std::numeric_limits<double>::infinity();
    else if (t.is_ident("nan")) v = std::numeric_limits<double>::quiet_NaN();
    else if (!text::parse_number(t.text, &v))
      text::fail_at(t, "expected a number that fits in a double, found " + text::describe(t));
    return negate ? -v : v;
  }

  Expr number_literal(bool negate) {
    const Token& t = peek();
    const bool int_syntax = t.kind == TokKind::Number && !t.is_float;
    double v = number_value(negate);
    if (int_syntax && !peek().is("{") && !digits_fit_i64(t.text, negate))
      text::fail_at(t, "expected an integer that fits in i64, found " + text::describe(t) +
                           " (write it with a '.' for a float)");
    // Literals hold doubles: past 2^53 an integer would be rounded silently (9007199254740993 read as ...992).
    if (int_syntax && !exact_integer(t.text, v))
      text::fail_at(t, "integer literal " + text::describe(t) + " is not exactly a double, which literals hold "
                       "(every integer up to 2^53 is)");
    if (int_syntax && v == 0.0) v = 0.0;  // -0 is the integer 0 (a signed zero printed as -0, another cache key)
    if (peek().is("{")) return annotated(t, v, negate);
    if (!int_syntax) return text::plain_float_literal(v);
    return text::plain_int_literal(v);  // (in i64: its digits were checked above, and it is exact)
  }

  Expr bool_literal() {
    const Token& t = next();
    const double v = t.text == "true" ? 1.0 : 0.0;
    if (peek().is("{")) return annotated(t, v, false);
    return text::plain_bool_literal(v != 0.0);
  }

  Expr annotated(const Token& t, double v, bool negate) {
    Annotation a = annotation(/*allow_weak=*/true);
    const std::string problem = text::annotated_literal_problem(v, a.type);
    if (!problem.empty()) text::fail_at(t, problem + ", found '" + (negate ? "-" : "") + t.text + "'");
    return build(t, [&] { return text::annotated_literal(v, a.type, a.weak); });
  }

  // `@op{type[, weak]}(...)`: the node exactly as given (make_node), for nodes the builders would
  // not produce in that form. Literal takes a number or its IEEE bits (`0x...`), Scalar a name,
  // Load a name with optional `{dtype}` then the indices; other ops may lead with a "name" string.
  Expr raw_node() {
    const Token& at = next();
    const Token& op_tok = peek();
    Op op = Op::Score;
    bool found = false;
    for (int i = 0; i < kNumOps && !found; ++i)
      if (op_tok.kind == TokKind::Ident && op_tok.text == op_name(Op(i))) op = Op(i), found = true;
    if (!found) fail_expected("an IR op name after '@'");
    next();
    Annotation a = annotation(/*allow_weak=*/true);
    expect("(");
    double value = 0.0;
    std::string name;
    DType buffer_dtype = DType::F32;
    std::vector<Expr> args;
    if (op == Op::Literal) {
      value = raw_literal_value();
      expect(")");
    } else if (op == Op::Scalar || op == Op::Load) {
      const Token& n = peek();
      if (n.kind != TokKind::Ident && n.kind != TokKind::String) fail_expected("a name");
      name = next().text;
      if (op == Op::Load) {
        const bool has_dtype = peek().is("{");
        if (has_dtype) buffer_dtype = annotation(false).type;
        buffer_dtype = declared(n, has_dtype, buffer_dtype, opt_.buffer_dtypes, "buffer");
        if (accept(",")) args = list(")");
        else expect(")");
      } else {
        expect(")");
      }
    } else {
      if (peek().kind == TokKind::String) {
        name = next().text;
        if (!peek().is(")")) expect(",");
      }
      args = list(")");
    }
    return build(at, [&] { return make_node(op, a.type, a.weak, args, value, name, buffer_dtype); });
  }

  double raw_literal_value() {
    const Token& t = peek();
    if (t.kind == TokKind::Hex) {
      next();
      if (t.text.size() > 18) text::fail_at(t, "expected at most 16 hex digits, found " + text::describe(t));
      const uint64_t bits = std::stoull(t.text.substr(2), nullptr, 16);
      double v;
      std::memcpy(&v, &bits, 8);
      return v;
    }
    if (t.is_ident("true") || t.is_ident("false")) return next().text == "true" ? 1.0 : 0.0;
    const bool negate = accept("-");
    if (!is_number_literal(peek())) fail_expected("a number or 0x bits");
    return number_value(negate);
  }

  std::vector<Token> t_;
  size_t p_ = 0;
  const ParseOptions& opt_;
  int depth_ = 0;
  std::map<std::string, Expr> bindings_;
  std::map<std::string, Token> bound_at_;
};

}  // namespace

Expr parse(const std::string& src, const ParseOptions& options) {
  return Parser(text::lex(src), options).program();
}

}  // namespace flexattn::ir
