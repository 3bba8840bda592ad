// The simplifier's rewrite rules, as data: name, pattern, condition, replacement.
//
// Every rule keeps meaning bit for bit: eval(replacement) == eval(node) in every environment, with
// NaN == NaN and +0 != -0 (tests/unit/ir/test_simplify.cc checks this on random expressions and
// edge environments). Float rules therefore follow IEEE 754, not algebra:
//   x + (-0.0) == x, but x + 0.0 is +0 for x = -0     -> only the -0.0 literal is an additive identity
//   x - 0.0 == x (also for x = -0)                    -> +0 is a subtractive identity
//   x * 0.0 is NaN for inf/NaN x and -0 for x < 0     -> no float x*0 rule
//   x - x, x / x are NaN for inf/NaN x                 -> int only
//   x == x is false for NaN                            -> int/bool only
//   !(a < b) != (a >= b) when either is NaN            -> comparison inversion for int/bool only
// Integer rules may be bolder: ints wrap (two's complement) and int x // 0, x % 0 are 0 in eval.
//
// Literal values and kernel structure: every literal is a runtime parameter (structural_key()
// ignores literal values), except that the rules below look at a literal's value when it is an
// identity or absorbing element (0, -0.0, 1, -1, true, false). So softcap(20) and softcap(30) share
// a kernel, while `x * 1` becomes `x` and compiles differently from `x * 2`. Folding all-literal
// subtrees produces literals whose values stay runtime parameters too; only when a folded value is
// one of those elements (or a folded Bool condition of a where) does it change structure further.
#include <cmath>

#include "simplify_rules.h"

namespace flexattn::ir::rules {
namespace {

// ---- pattern builders ----
Pat X(int slot) { return Pat{Pat::Kind::Any, slot, nullptr, Op::Score, false, {}}; }
Pat lit(LitPred p) { return Pat{Pat::Kind::Lit, -1, p, Op::Score, false, {}}; }
Pat op(Op o, std::vector<Pat> args) { return Pat{Pat::Kind::Op, -1, nullptr, o, false, std::move(args)}; }
Pat comm(Op o, Pat a, Pat b) { return Pat{Pat::Kind::Op, -1, nullptr, o, true, {std::move(a), std::move(b)}}; }

// ---- literal predicates (on the literal's stored value, which is what eval reads) ----
bool is_pos_zero(const Node& n) { return n.value == 0.0 && !std::signbit(n.value); }
bool is_int_zero(const Node& n) { return is_int(n.type) && n.value == 0.0; }
bool is_neg_zero(const Node& n) { return n.type == DType::F32 && n.value == 0.0 && std::signbit(n.value); }
bool is_one(const Node& n) { return n.value == 1.0; }
bool is_minus_one(const Node& n) { return n.type != DType::Bool && n.value == -1.0; }
bool is_true(const Node& n) { return n.type == DType::Bool && n.value != 0.0; }
bool is_false(const Node& n) { return n.type == DType::Bool && n.value == 0.0; }
bool is_any(const Node&) { return true; }

// ---- conditions ----
DType t(const Match& m) { return m.node->type; }
bool int_node(const Match& m) { return is_int(t(m)); }
bool float_node(const Match& m) { return t(m) == DType::F32; }
bool discrete(DType d) { return d != DType::F32; }
bool x0_discrete(const Match& m) { return discrete(m.x[0]->type); }
bool x0_bool(const Match& m) { return m.x[0]->type == DType::Bool; }
// Re-associating rules build a new node of the same type from the captures; promotion could
// convert a capture differently from the original, so all of them must already have that type.
bool all_node_type(const Match& m) {
  for (const auto& x : m.x)
    if (x.get() && x->type != t(m)) return false;
  return true;
}
bool float_same(const Match& m) { return float_node(m) && all_node_type(m); }
bool int_same(const Match& m) { return int_node(m) && all_node_type(m); }
bool both_discrete(const Match& m) { return discrete(m.x[0]->type) && discrete(m.x[1]->type); }
bool x0_bool_node_bool(const Match& m) { return x0_bool(m) && t(m) == DType::Bool; }
// cast(cast(x, T1), T0) with x: T0 where T1 holds every T0 value exactly.
bool round_trip_cast(const Match& m) {
  DType t0 = m.x[0]->type, t1 = m.node->args[0]->type;
  if (t(m) != t0) return false;
  if (t0 == DType::Bool) return t1 != DType::Bool;
  return t0 == DType::I32 && t1 == DType::I64;
}
bool cast_same_type(const Match& m) { return m.x[0]->type == t(m); }

// ---- replacements ----
Expr x0(const Match& m) { return m.x[0]; }
Expr x1(const Match& m) { return m.x[1]; }
Expr lit_of(const Match& m, double v) { return literal(v, t(m), m.node->weak); }
Expr zero(const Match& m) { return lit_of(m, 0.0); }
Expr one(const Match& m) { return lit_of(m, 1.0); }
Expr yes(const Match& m) { return lit_of(m, 1.0); }
Expr no(const Match& m) { return lit_of(m, 0.0); }
Expr node_of(const Match& m, Op o, std::vector<Expr> args) {
  return make_node(o, t(m), m.node->weak, std::move(args));
}
Expr neg_x0(const Match& m) { return node_of(m, Op::Neg, {m.x[0]}); }
Expr abs_x0(const Match& m) { return node_of(m, Op::Abs, {m.x[0]}); }
Expr not_x0(const Match& m) { return unary(Op::Not, m.x[0]); }
Expr sub_x0_x1(const Match& m) { return node_of(m, Op::Sub, {m.x[0], m.x[1]}); }
Expr add_x0_x1(const Match& m) { return node_of(m, Op::Add, {m.x[0], m.x[1]}); }
Expr mul_x0_x1(const Match& m) { return node_of(m, Op::Mul, {m.x[0], m.x[1]}); }
Expr div_x0_x1(const Match& m) { return node_of(m, Op::Div, {m.x[0], m.x[1]}); }
Expr where_swapped(const Match& m) { return node_of(m, Op::Select, {m.x[0], m.x[2], m.x[1]}); }
template <Op O>
Expr cmp_x0_x1(const Match& m) { return node_of(m, O, {m.x[0], m.x[1]}); }
// The operand itself (already the simpler form, e.g. the inner abs of abs(abs x)).
Expr arg0(const Match& m) { return Expr(m.node->args[0]); }
// `e` as a value of the node's type: itself, or the Cast that performs exactly the conversion the
// node applies to its operands (eval converts operands to the node type the same way).
Expr as_node_type(const Match& m, const Expr& e) {
  if (e->type == t(m)) return e;
  return make_node(Op::Cast, t(m), m.node->weak, {e});
}
Expr x0_cast(const Match& m) { return as_node_type(m, m.x[0]); }
// where(literal, a, b): the branch the literal selects.
Expr where_literal(const Match& m) {
  Value c = eval(Expr(m.node->args[0]), EvalEnv{});
  return as_node_type(m, c.as_bool() ? m.x[1] : m.x[2]);
}

}  // namespace

const std::vector<Rule>& simplify_rules() {
  // Locals, not namespace-scope constants: simplify() may run during another file's static init.
  const Pat A = X(0), B = X(1), C = X(2);
  static const std::vector<Rule> rules = {
      // ---- additive ----
      // An int-valued x converts to a float that is never -0, so +0 is an identity for it.
      {"int x + (+0) -> x", comm(Op::Add, A, lit(is_pos_zero)), x0_discrete, x0_cast},
      {"x + -0.0 -> x", comm(Op::Add, A, lit(is_neg_zero)), nullptr, x0_cast},
      {"x - (+0) -> x", op(Op::Sub, {A, lit(is_pos_zero)}), nullptr, x0_cast},
      {"int x - x -> 0", op(Op::Sub, {A, A}), int_node, zero},
      {"int 0 - x -> -x", op(Op::Sub, {lit(is_int_zero), A}), int_same, neg_x0},
      {"float -0.0 - x -> -x", op(Op::Sub, {lit(is_neg_zero), A}), float_same, neg_x0},
      {"x + -y -> x - y", comm(Op::Add, A, op(Op::Neg, {B})), all_node_type, sub_x0_x1},
      {"x - -y -> x + y", op(Op::Sub, {A, op(Op::Neg, {B})}), all_node_type, add_x0_x1},
      {"--x -> x", op(Op::Neg, {op(Op::Neg, {A})}), nullptr, x0},
      // ---- multiplicative ----
      {"x * 1 -> x", comm(Op::Mul, A, lit(is_one)), nullptr, x0_cast},
      {"int x * 0 -> 0", comm(Op::Mul, A, lit(is_int_zero)), int_node, zero},
      {"x * -1 -> -x", comm(Op::Mul, A, lit(is_minus_one)), all_node_type, neg_x0},
      {"-x * -y -> x * y", op(Op::Mul, {op(Op::Neg, {A}), op(Op::Neg, {B})}), all_node_type, mul_x0_x1},
      {"x / 1 -> x", op(Op::Div, {A, lit(is_one)}), nullptr, x0_cast},
      {"-x / -y -> x / y", op(Op::Div, {op(Op::Neg, {A}), op(Op::Neg, {B})}), float_same, div_x0_x1},
      {"int x // 1 -> x", op(Op::FloorDiv, {A, lit(is_one)}), int_node, x0_cast},
      {"int x // 0 -> 0", op(Op::FloorDiv, {A, lit(is_int_zero)}), int_node, zero},
      {"int x % 1 -> 0", op(Op::Mod, {A, lit(is_one)}), int_node, zero},
      {"int x % -1 -> 0", op(Op::Mod, {A, lit(is_minus_one)}), int_node, zero},
      {"int x % 0 -> 0", op(Op::Mod, {A, lit(is_int_zero)}), int_node, zero},
      {"pow(x, 1) -> x", op(Op::Pow, {A, lit(is_one)}), nullptr, x0_cast},
      {"pow(x, 0) -> 1", op(Op::Pow, {A, lit(is_pos_zero)}), nullptr, one},
      // ---- unary ----
      {"abs(abs x) -> abs x", op(Op::Abs, {op(Op::Abs, {A})}), nullptr, arg0},
      {"abs(-x) -> abs x", op(Op::Abs, {op(Op::Neg, {A})}), all_node_type, abs_x0},
      {"floor(int x) -> x", op(Op::Floor, {A}), x0_discrete, x0},
      {"ceil(int x) -> x", op(Op::Ceil, {A}), x0_discrete, x0},
      {"floor(floor x) -> floor x", op(Op::Floor, {op(Op::Floor, {A})}), nullptr, arg0},
      {"floor(ceil x) -> ceil x", op(Op::Floor, {op(Op::Ceil, {A})}), nullptr, arg0},
      {"ceil(ceil x) -> ceil x", op(Op::Ceil, {op(Op::Ceil, {A})}), nullptr, arg0},
      {"ceil(floor x) -> floor x", op(Op::Ceil, {op(Op::Floor, {A})}), nullptr, arg0},
      {"cast(x: T, T) -> x", op(Op::Cast, {A}), cast_same_type, x0},
      {"cast(cast(x, wider), T) -> x", op(Op::Cast, {op(Op::Cast, {A})}), round_trip_cast, x0},
      {"min(x, x) -> x", op(Op::Min, {A, A}), nullptr, x0},
      {"max(x, x) -> x", op(Op::Max, {A, A}), nullptr, x0},
      // ---- comparisons of one int/bool operand with itself ----
      {"x == x -> true", op(Op::Eq, {A, A}), x0_discrete, yes},
      {"x <= x -> true", op(Op::Le, {A, A}), x0_discrete, yes},
      {"x >= x -> true", op(Op::Ge, {A, A}), x0_discrete, yes},
      {"x != x -> false", op(Op::Ne, {A, A}), x0_discrete, no},
      {"x < x -> false", op(Op::Lt, {A, A}), x0_discrete, no},
      {"x > x -> false", op(Op::Gt, {A, A}), x0_discrete, no},
      // ---- logic ----
      {"!!b -> b", op(Op::Not, {op(Op::Not, {A})}), x0_bool_node_bool, x0},
      {"!(a == b) -> a != b", op(Op::Not, {op(Op::Eq, {A, B})}), nullptr, cmp_x0_x1<Op::Ne>},
      {"!(a != b) -> a == b", op(Op::Not, {op(Op::Ne, {A, B})}), nullptr, cmp_x0_x1<Op::Eq>},
      {"int !(a < b) -> a >= b", op(Op::Not, {op(Op::Lt, {A, B})}), both_discrete, cmp_x0_x1<Op::Ge>},
      {"int !(a <= b) -> a > b", op(Op::Not, {op(Op::Le, {A, B})}), both_discrete, cmp_x0_x1<Op::Gt>},
      {"int !(a > b) -> a <= b", op(Op::Not, {op(Op::Gt, {A, B})}), both_discrete, cmp_x0_x1<Op::Le>},
      {"int !(a >= b) -> a < b", op(Op::Not, {op(Op::Ge, {A, B})}), both_discrete, cmp_x0_x1<Op::Lt>},
      {"b && true -> b", comm(Op::And, A, lit(is_true)), x0_bool_node_bool, x0},
      {"b && false -> false", comm(Op::And, A, lit(is_false)), x0_bool_node_bool, no},
      {"b || false -> b", comm(Op::Or, A, lit(is_false)), x0_bool_node_bool, x0},
      {"b || true -> true", comm(Op::Or, A, lit(is_true)), x0_bool_node_bool, yes},
      {"b && b -> b", op(Op::And, {A, A}), x0_bool_node_bool, x0},
      {"b || b -> b", op(Op::Or, {A, A}), x0_bool_node_bool, x0},
      // ---- where ----
      {"where(literal, a, b) -> a or b", op(Op::Select, {lit(is_any), B, C}), nullptr, where_literal},
      {"where(c, a, a) -> a", op(Op::Select, {X(0), B, B}), nullptr, x1},
      {"where(!c, a, b) -> where(c, b, a)", op(Op::Select, {op(Op::Not, {A}), B, C}), x0_bool, where_swapped},
      {"where(c, true, false) -> c", op(Op::Select, {A, lit(is_true), lit(is_false)}), x0_bool_node_bool, x0},
      {"where(c, false, true) -> !c", op(Op::Select, {A, lit(is_false), lit(is_true)}), x0_bool_node_bool,
       not_x0},
  };
  return rules;
}

bool match(const Pat& p, const Expr& e, Match* m) {
  switch (p.kind) {
    case Pat::Kind::Any: {
      Expr& slot = m->x[size_t(p.slot)];
      if (!slot.empty()) return slot.get() == e.get();
      slot = e;
      return true;
    }
    case Pat::Kind::Lit: return e->op == Op::Literal && p.lit(*e);
    case Pat::Kind::Op: {
      if (e->op != p.op || e->args.size() != p.args.size()) return false;
      Match saved = *m;
      bool ok = true;
      for (size_t i = 0; ok && i < p.args.size(); ++i) ok = match(p.args[i], Expr(e->args[i]), m);
      if (ok || !p.commutative) return ok;
      *m = saved;
      return match(p.args[1], Expr(e->args[0]), m) && match(p.args[0], Expr(e->args[1]), m);
    }
  }
  return false;
}

}  // namespace flexattn::ir::rules
