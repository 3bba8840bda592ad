// Constant folding: a node whose operands are all literals becomes one literal. The value comes from
// the interpreter, so folding is exactly the definition of the node (wrapping, NaN, -0.0 included).
#include <cmath>
#include <cstring>

#include "simplify_rules.h"

namespace flexattn::ir::rules {
namespace {

bool bit_equal(const Value& a, const Value& b) {
  if (a.type != b.type) return false;
  if (a.type != DType::F32) return a.i == b.i;
  if (std::isnan(a.f) && std::isnan(b.f)) return true;
  return std::memcmp(&a.f, &b.f, sizeof(double)) == 0;
}

}  // namespace

std::optional<Expr> fold_constants(const Expr& e) {
  const Node& n = *e;
  // Loads read runtime buffers; leaves have nothing to fold.
  if (n.args.empty() || n.op == Op::Load) return std::nullopt;
  for (const auto& a : n.args)
    if (a->op != Op::Literal) return std::nullopt;
  const EvalEnv no_inputs;  // all-literal subtrees read no scalar and no buffer
  Value v = eval(e, no_inputs);
  if (v.type != n.type) return std::nullopt;
  double d = v.f;
  if (v.type != DType::F32) {
    // Node::value is a double: an i64 it cannot hold exactly (odd, beyond 2^53) stays an expression.
    d = double(v.i);
    if (!(std::fabs(d) < 9.2e18) || int64_t(d) != v.i) return std::nullopt;
  }
  Expr lit = literal(d, n.type, n.weak);
  if (!bit_equal(eval(lit, no_inputs), v)) return std::nullopt;
  return lit;
}

}  // namespace flexattn::ir::rules
