// position_dependence(): how a value depends on (q_idx, kv_idx), from the structure of the DAG alone.
//
// Each node gets one of
//   Affine(a, c)  an integer value a*q_idx + c*kv_idx + u, u free of q_idx / kv_idx / score, with a and c
//                 known integers (ring arithmetic: i32 and i64 wrap, so Add, Sub, Neg and narrowing
//                 casts keep the form exactly). Affine(0, 0) is a value free of the positions.
//   Diag          a function of q_idx - kv_idx (and of b, h, literals, scalars, buffers) only.
//   General       anything else (score, or positions not only through their difference).
// An Affine(a, -a) value is a function of q_idx - kv_idx, so any operation on only such values is
// Diag. Multiplying by a value whose magnitude is unknown to the analysis (a literal's value is a
// runtime parameter and must not change the answer) keeps Affine(a, -a) Diag and turns any other
// position-dependent Affine into General: the answer depends on no literal value, so it never makes
// two variants that differ only in a literal generate different sources.
// Widening an i32 Affine(a, c) to i64 is exact for the leaves q_idx and kv_idx (valid positions are
// non-negative i32 values) and for Affine(a, -a) (a function of the difference stays one); an i32 sum
// that could wrap, widened, is General.
#include <unordered_map>

#include "flexattn/error.h"
#include "flexattn/ir_passes.h"

namespace flexattn::ir {
namespace {

struct Dep {
  enum Kind { Affine, Diag, General } kind = Affine;
  long long a = 0, c = 0;
  bool free() const { return kind == Affine && a == 0 && c == 0; }
  bool diag_only() const { return kind == Diag || (kind == Affine && a + c == 0); }
};

Dep general() { return Dep{Dep::General, 0, 0}; }
Dep diag() { return Dep{Dep::Diag, 0, 0}; }
Dep affine(long long a, long long c) { return Dep{Dep::Affine, a, c}; }

// Any operation whose result depends on its operands' values only (no arithmetic structure kept).
Dep opaque(std::initializer_list<Dep> args) {
  bool all_free = true, all_diag = true;
  for (const Dep& d : args) all_free = all_free && d.free(), all_diag = all_diag && d.diag_only();
  if (all_free) return affine(0, 0);
  return all_diag ? diag() : general();
}

// The value of a node of type `from` converted to `to` (an explicit Cast or an operand's implicit
// conversion to its node's type). `leaf`: the operand is q_idx or kv_idx itself.
Dep convert(const Dep& d, DType from, DType to, bool leaf) {
  if (from == to || d.free() || d.kind == Dep::General) return d;
  if (is_int(from) && is_int(to) && d.kind == Dep::Affine) {
    const bool widening = from == DType::I32 && to == DType::I64;
    if (!widening || leaf) return d;  // narrowing is a ring homomorphism; a leaf widens exactly
  }
  return opaque({d});
}

// Nodes in topo_order, operands first, so every operand is known when its user is computed: no recursion, which
// overflowed the stack on the long chains tracers and the text form's bindings make.
class Analysis {
 public:
  Dep run(const Expr& e) {
    for (const Node* n : topo_order(e)) memo_[n] = compute(*n);
    return of(e.get());
  }

 private:
  Dep of(const Node* n) const { return memo_.at(n); }

  Dep operand(const Node& n, size_t i) {
    const Node* a = n.args[i].get();
    return convert(of(a), a->type, n.type, a->op == Op::QIdx || a->op == Op::KvIdx);
  }

  Dep compute(const Node& n) {
    switch (n.op) {
      case Op::Score: return general();
      case Op::QIdx: return affine(1, 0);
      case Op::KvIdx: return affine(0, 1);
      case Op::Batch: case Op::Head: case Op::Literal: case Op::Scalar: return affine(0, 0);
      case Op::Cast: {
        const Node* a = n.args[0].get();
        return convert(of(a), a->type, n.type, a->op == Op::QIdx || a->op == Op::KvIdx);
      }
      case Op::Neg:
        if (is_int(n.type)) {
          const Dep d = operand(n, 0);
          if (d.kind == Dep::Affine) return affine(-d.a, -d.c);
          return d;
        }
        break;
      case Op::Add: case Op::Sub:
        if (is_int(n.type)) {
          const Dep x = operand(n, 0), y = operand(n, 1);
          if (x.kind == Dep::Affine && y.kind == Dep::Affine) {
            const long long s = n.op == Op::Add ? 1 : -1;
            return affine(x.a + s * y.a, x.c + s * y.c);
          }
          return opaque({x, y});
        }
        break;
      case Op::Mul:
        if (is_int(n.type)) {
          const Dep x = operand(n, 0), y = operand(n, 1);
          if (x.free()) return y.kind == Dep::Affine && !y.diag_only() ? general() : opaque({y});
          if (y.free()) return x.kind == Dep::Affine && !x.diag_only() ? general() : opaque({x});
          return opaque({x, y});
        }
        break;
      default: break;
    }
    // Everything else (float arithmetic, comparisons, logic, where, min / max, floor division, buffer
    // loads, ...) depends on its operands' values only.
    bool all_free = true, all_diag = true;
    for (const NodePtr& a : n.args) {
      const Dep d = of(a.get());
      all_free = all_free && d.free();
      all_diag = all_diag && d.diag_only();
    }
    if (all_free) return affine(0, 0);
    return all_diag ? diag() : general();
  }

  std::unordered_map<const Node*, Dep> memo_;
};

}  // namespace

PositionDependence position_dependence(const Expr& e) {
  if (e.empty()) throw Error("position_dependence: the expression is empty");
  Analysis a;
  const Dep d = a.run(e);
  if (d.free()) return PositionDependence::None;
  if (d.diag_only()) return PositionDependence::Diagonal;
  return PositionDependence::General;
}

}  // namespace flexattn::ir
