// differentiate(): reverse-mode symbolic derivative of a score_mod w.r.t. `score` and w.r.t. each
// distinct Load of a float buffer whose gradient is wanted.
//
// Adjoints flow from the root (adjoint 1) to operands in reverse topological order, so the
// expressions follow torch's backward formulas (tools/autograd/derivatives.yaml) in the order the
// joint graph applies them, with grad_out = 1:
//   abs      g * sgn(a), sgn = (a > 0) - (a < 0): 0 at 0 and at NaN (torch.sign(nan) == 0)
//   min/max  the larger (smaller) operand takes g; on a tie each takes g / 2 (torch >= 1.7); a NaN
//            operand makes both comparisons false, so both take g, as in torch
//   pow      d/da = where(b == 0, 0, g * (b * a^(b-1)));  d/db = g * where(a == 0 & b >= 0, 0, y * log a)
//   div      d/da = g / b;  d/db = -g * ((a / b) / b)
//   mod      d/da = g;  d/db = -g * (a // b)   (torch: -grad * self.div(other, rounding_mode="floor"))
//   where    where(c, g, 0) and where(c, 0, g)
//   floor, ceil, floordiv, comparisons, logic, casts to int/bool and every int/bool-typed node:
//            no gradient (torch gives zeros).
// A path whose adjoint is structurally zero contributes no term at all, as in torch where a
// zero-gradient op returns zeros without multiplying (so 0 * inf never leaks a NaN).
//
// A score_mod that ignores `score` gets d_score = 0 (torch raises during training; we do not).
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "flexattn/error.h"
#include "flexattn/ir_passes.h"
#include "simplify_rules.h"

namespace flexattn::ir {
namespace {

Expr f32(double v) { return literal(v, DType::F32, false); }
Expr as_f32(const Expr& e) { return e.type() == DType::F32 ? e : cast(e, DType::F32); }

class ReverseMode {
 public:
  ReverseMode(const Expr& root, const std::unordered_set<const Node*>& targets) {
    order_ = topo_order(root);
    handle_[root.get()] = root;
    for (const Node* n : order_) {
      for (const auto& a : n->args) handle_.emplace(a.get(), Expr(a));
      bool act = targets.count(n) > 0;
      for (const auto& a : n->args) act = act || active_.count(a.get()) > 0;
      if (act) active_.insert(n);
    }
    if (root.type() == DType::F32 && active_.count(root.get())) adj_[root.get()] = f32(1.0);
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      auto g = adj_.find(*it);
      if (g != adj_.end()) propagate(**it, g->second);
    }
  }
  ReverseMode(const ReverseMode&) = delete;
  ReverseMode& operator=(const ReverseMode&) = delete;

  Expr handle(const Node* n) const { return handle_.at(n); }
  // d root / d n, or an empty Expr when it is structurally zero.
  Expr adjoint(const Node* n) const {
    auto it = adj_.find(n);
    return it == adj_.end() ? Expr() : it->second;
  }

 private:
  // Adds contribution `c` (built lazily: only when `a` can carry a gradient) to the adjoint of a.
  template <typename F>
  void acc(const Expr& a, F c) {
    if (a.type() != DType::F32 || !active_.count(a.get())) return;
    Expr v = as_f32(c());
    auto it = adj_.find(a.get());
    if (it == adj_.end()) adj_.emplace(a.get(), v);
    else it->second = it->second + v;
  }

  void propagate(const Node& n, const Expr& g) {
    if (n.type != DType::F32) return;
    const Expr y = handle_.at(&n);
    auto arg = [&](size_t i) { return Expr(n.args[i]); };
    const double ln2 = std::log(2.0);
    switch (n.op) {
      case Op::Score:
      case Op::Batch:
      case Op::Head:
      case Op::QIdx:
      case Op::KvIdx:
      case Op::Literal:
      case Op::Scalar:
      case Op::Load:
      case Op::Floor:
      case Op::Ceil:
      case Op::Detach:
      case Op::Not:
      case Op::FloorDiv:
      case Op::Eq:
      case Op::Ne:
      case Op::Lt:
      case Op::Le:
      case Op::Gt:
      case Op::Ge:
      case Op::And:
      case Op::Or:
      case Op::BitAnd:
      case Op::BitOr:
      case Op::Shl:
      case Op::Shr: return;
      case Op::Cast: return acc(arg(0), [&] { return g; });
      case Op::Neg: return acc(arg(0), [&] { return -g; });
      case Op::Abs: {
        Expr a = arg(0);
        return acc(a, [&] {
          Expr negative = where(binary(Op::Lt, a, f32(0.0)), f32(-1.0), f32(0.0));
          return g * where(binary(Op::Gt, a, f32(0.0)), f32(1.0), negative);
        });
      }
      case Op::Exp: return acc(arg(0), [&] { return g * y; });
      case Op::Exp2: return acc(arg(0), [&] { return (g * y) * f32(ln2); });
      case Op::Log: return acc(arg(0), [&] { return g / arg(0); });
      case Op::Log2: return acc(arg(0), [&] { return g / (arg(0) * f32(ln2)); });
      case Op::Sqrt: return acc(arg(0), [&] { return g / (f32(2.0) * y); });
      case Op::Rsqrt: return acc(arg(0), [&] { return (f32(-0.5) * g) * pow(y, f32(3.0)); });
      case Op::Tanh:
      case Op::TanhApprox: return acc(arg(0), [&] { return g * (f32(1.0) - y * y); });
      case Op::Sigmoid: return acc(arg(0), [&] { return (g * (f32(1.0) - y)) * y; });
      case Op::Sin: return acc(arg(0), [&] { return g * cos(arg(0)); });
      case Op::Cos: return acc(arg(0), [&] { return g * -sin(arg(0)); });
      case Op::Tan: return acc(arg(0), [&] { return g * (f32(1.0) + y * y); });
      case Op::Erf:  // 2 / sqrt(pi) exp(-x^2)
        return acc(arg(0), [&] { return g * (f32(1.1283791670955126) * exp(-(arg(0) * arg(0)))); });
      case Op::Add:
        acc(arg(0), [&] { return g; });
        return acc(arg(1), [&] { return g; });
      case Op::Sub:
        acc(arg(0), [&] { return g; });
        return acc(arg(1), [&] { return -g; });
      case Op::Mul:
        acc(arg(0), [&] { return g * arg(1); });
        return acc(arg(1), [&] { return g * arg(0); });
      case Op::Div:
        acc(arg(0), [&] { return g / arg(1); });
        return acc(arg(1), [&] { return -g * ((arg(0) / arg(1)) / arg(1)); });
      case Op::Mod:
        acc(arg(0), [&] { return g; });
        return acc(arg(1), [&] { return -g * floordiv(arg(0), arg(1)); });
      case Op::Min:
      case Op::Max: {
        // torch: where(a == b, g / 2, g).masked_fill_(a loses, 0), per operand.
        const Op a_loses = n.op == Op::Max ? Op::Lt : Op::Gt;
        const Op b_loses = n.op == Op::Max ? Op::Gt : Op::Lt;
        Expr a = arg(0), b = arg(1);
        auto share = [&] { return where(binary(Op::Eq, a, b), g / f32(2.0), g); };
        acc(a, [&] { return where(binary(a_loses, a, b), f32(0.0), share()); });
        return acc(b, [&] { return where(binary(b_loses, a, b), f32(0.0), share()); });
      }
      case Op::Pow: {
        Expr a = arg(0), b = arg(1);
        acc(a, [&] {
          Expr bb = b.type() == DType::Bool ? cast(b, DType::F32) : b;
          Expr bm1 = binary(Op::Sub, bb, Expr(1));
          return where(binary(Op::Eq, b, f32(0.0)), f32(0.0), g * (b * pow(a, bm1)));
        });
        return acc(b, [&] {
          Expr base_zero = binary(Op::And, binary(Op::Eq, a, f32(0.0)), binary(Op::Ge, b, f32(0.0)));
          return g * where(base_zero, f32(0.0), y * log(a));
        });
      }
      case Op::Select:
        acc(arg(1), [&] { return where(arg(0), g, f32(0.0)); });
        return acc(arg(2), [&] { return where(arg(0), f32(0.0), g); });
    }
  }

  std::vector<const Node*> order_;
  std::unordered_map<const Node*, Expr> handle_;
  std::unordered_set<const Node*> active_;
  std::unordered_map<const Node*, Expr> adj_;
};

Expr finish(const Expr& d) { return !d.empty() ? simplify(d) : f32(0.0); }

}  // namespace

ScoreModGrad differentiate(const Expr& score_mod, const std::vector<std::string>& grad_buffers) {
  check(!score_mod.empty(), "differentiate: score_mod is empty; expected an expression");
  const std::unordered_set<std::string> wanted(grad_buffers.begin(), grad_buffers.end());
  std::unordered_set<const Node*> targets;
  std::vector<const Node*> loads;
  const Node* score_node = nullptr;
  for (const Node* n : topo_order(score_mod)) {
    if (n->op == Op::Score) {
      score_node = n;
      targets.insert(n);
    }
    if (n->op != Op::Load || !wanted.count(n->name)) continue;
    check(is_float(n->buffer_dtype),
          "differentiate: grad_buffers names '" + n->name + "', a " + std::string(dtype_name(n->buffer_dtype)) +
              " buffer; only float buffers (f16, bf16, f32) have gradients");
    loads.push_back(n);
    targets.insert(n);
  }
  ReverseMode rm(score_mod, targets);
  ScoreModGrad out;
  out.d_score = finish(score_node ? rm.adjoint(score_node) : Expr());
  for (const Node* n : loads) out.loads.push_back(LoadGrad{rm.handle(n), finish(rm.adjoint(n))});
  return out;
}

}  // namespace flexattn::ir
