// kv_range: a mask_mod as one interval of kv positions per query row (declared in flexattn/ir_passes.h).
//
// Exactness. Positions are in [0, 2^31), so kv_idx, q_idx - kv_idx and kv_idx - q_idx never wrap in i32, and
// converting them to the comparison's type (i32 or i64) keeps their value. The other side e is any kv-free
// integer expression: the bound is built from e's value *as the comparison sees it* (converted to its type,
// wrapped or truncated exactly as mask_mod's code converts it), so `kv_idx <= q_idx + W` with a wrapping sum
// is taken as it is evaluated. Then, in exact integers, kv + c*q cmp e  <=>  kv cmp' (e - c*q), and with e
// saturated to +-2^40 no comparison against an index changes while the sum stays far inside 64 bits.
#include <algorithm>
#include <unordered_map>

#include "flexattn/ir_passes.h"

namespace flexattn::ir {

namespace {

class Builder {
 public:
  KvRange out;

  explicit Builder(const Expr& root) {
    // Operands first (topo_order is iterative): a recursive walk overflowed the stack on long chains.
    for (const Node* n : topo_order(root)) {
      unsigned r = (n->op == Op::KvIdx ? kKv : 0u) | (n->type == DType::F32 ? kF32 : 0u);
      for (const NodePtr& a : n->args) r |= holds_[a.get()];
      holds_[n] = r;
    }
  }

  // A set of kv positions per row: [lo, hi] (node indices; Open nodes where unbounded). has_lo / has_hi: the
  // side can be finite (an `or` of two ranges is an interval when both are open on the same side).
  struct Range {
    bool ok = false;
    bool row = false;  // a kv-free condition: every kv or none (pred, negated when neg)
    NodePtr pred;
    bool neg = false;
    bool has_lo = false, has_hi = false;
    int lo = -1, hi = -1;
  };

  // The and / or / not / where structure above the comparisons, `depth` levels down. Deeper than kMaxDepth the mask
  // is not taken as a range (mask_mod is then evaluated per entry, as for any other mask): this recursion, the
  // bounds' evaluation (eval_bound) and their generated code follow that depth, and a chain of 100000 `and`s (a
  // tracer's output, or the text form's bindings) overflowed the stack.
  static constexpr int kMaxDepth = 512;
  Range build(const NodePtr& n, bool neg, int depth = 0) {
    if (n->type != DType::Bool || depth > kMaxDepth) return {};
    ++depth;
    if (!has_kv(n.get())) {
      if (has_f32(n.get())) return {};  // see holds
      Range r;
      r.ok = r.row = true;
      r.pred = n;
      r.neg = neg;
      return r;
    }
    switch (n->op) {
      case Op::Not: return build(n->args[0], !neg, depth);
      case Op::And: return neg ? join(build(n->args[0], true, depth), build(n->args[1], true, depth))
                               : meet(build(n->args[0], false, depth), build(n->args[1], false, depth));
      case Op::Or: return neg ? meet(build(n->args[0], true, depth), build(n->args[1], true, depth))
                              : join(build(n->args[0], false, depth), build(n->args[1], false, depth));
      case Op::Select: {
        if (has_kv(n->args[0].get()) || has_f32(n->args[0].get())) return {};
        const Range a = range_of(build(n->args[1], neg, depth)), b = range_of(build(n->args[2], neg, depth));
        if (!a.ok || !b.ok) return {};
        Range r;
        r.ok = true;
        r.has_lo = a.has_lo || b.has_lo;
        r.has_hi = a.has_hi || b.has_hi;
        r.lo = select(n->args[0], false, a.lo, b.lo);
        r.hi = select(n->args[0], false, a.hi, b.hi);
        return r;
      }
      case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: return atom(*n, neg);
      default: return {};
    }
  }

  Range range_of(const Range& x) {  // a row condition as a range: all of kv, or none (lo = +open)
    if (!x.ok || !x.row) return x;
    Range r;
    r.ok = r.has_lo = true;
    r.lo = select(x.pred, x.neg, open(-1), open(+1));
    r.hi = open(+1);
    return r;
  }

 private:
  // What a subtree holds, once per node: kKv (kv_idx) and kF32 (an f32 value). Bounds and row conditions with an
  // f32 value inside are refused: the kernels evaluate them in kv_range and the other entries in mask_mod, two
  // functions whose f32 code the compiler may contract differently (FMA), so only integer and boolean arithmetic
  // (exact everywhere) keeps the two equal.
  static constexpr unsigned kKv = 1, kF32 = 2;
  std::unordered_map<const Node*, unsigned> holds_;  // every node of the root, from the constructor
  bool has_kv(const Node* n) const { return (holds_.at(n) & kKv) != 0; }
  bool has_f32(const Node* n) const { return (holds_.at(n) & kF32) != 0; }
  int add(KvBound b) {
    out.nodes.push_back(std::move(b));
    return int(out.nodes.size()) - 1;
  }
  int open(int sign) {
    KvBound b;
    b.kind = KvBound::Open;
    b.sign = sign;
    return add(b);
  }
  int select(const NodePtr& pred, bool neg, int a, int b) {
    KvBound s;
    s.kind = KvBound::Select;
    s.pred = pred;
    s.pred_neg = neg;
    s.a = a;
    s.b = b;
    return add(s);
  }
  int extreme(KvBound::Kind k, int a, int b) {
    KvBound m;
    m.kind = k;
    m.a = a;
    m.b = b;
    return add(m);
  }

  // kv_idx, q_idx - kv_idx, kv_idx - q_idx (i32): value = beta * kv + gamma * q.
  static bool kv_side(const Node& n, int* beta, int* gamma) {
    // i64(kv side), as a plain integer beyond 32 bits widens it (expr.cc): the side never wraps, so the cast
    // keeps its value.
    if (n.op == Op::Cast && n.type == DType::I64) {
      const Node& a = *n.args[0];
      return a.op != Op::Cast && kv_side(a, beta, gamma);
    }
    if (n.type != DType::I32) return false;
    if (n.op == Op::KvIdx) return *beta = 1, *gamma = 0, true;
    if (n.op != Op::Sub) return false;
    const Op a = n.args[0]->op, b = n.args[1]->op;
    if (a == Op::QIdx && b == Op::KvIdx) return *beta = -1, *gamma = 1, true;
    if (a == Op::KvIdx && b == Op::QIdx) return *beta = 1, *gamma = -1, true;
    return false;
  }

  Range atom(const Node& n, bool neg) {
    DType ct = promote(*n.args[0], *n.args[1]);
    if (ct != DType::I32 && ct != DType::I64) return {};
    int beta = 0, gamma = 0, side = -1;
    for (int s : {0, 1})
      if (!has_kv(n.args[size_t(1 - s)].get()) && kv_side(*n.args[size_t(s)], &beta, &gamma)) side = s;
    if (side < 0) return {};
    const NodePtr& e = n.args[size_t(1 - side)];
    if ((e->type != DType::I32 && e->type != DType::I64) || has_f32(e.get())) return {};
    // As "kv-side cmp e": transpose when kv is on the right; negate; then divide by beta (flips when -1).
    enum Cmp { LT, LE, GT, GE, EQ, NE } c;
    switch (n.op) {
      case Op::Lt: c = LT; break;
      case Op::Le: c = LE; break;
      case Op::Gt: c = GT; break;
      case Op::Ge: c = GE; break;
      case Op::Eq: c = EQ; break;
      default: c = NE; break;
    }
    auto flip = [](Cmp x) { return x == LT ? GT : x == LE ? GE : x == GT ? LT : x == GE ? LE : x; };
    auto negate = [](Cmp x) { return x == LT ? GE : x == LE ? GT : x == GT ? LE : x == GE ? LT : x == EQ ? NE : EQ; };
    if (side == 1) c = flip(c);
    if (neg) c = negate(c);
    if (beta < 0) c = flip(c);
    if (c == NE) return {};
    // beta * kv + gamma * q cmp e  <=>  kv cmp beta * (e - gamma * q): the term q * (-gamma * beta) + beta * e.
    KvBound t;
    t.kind = KvBound::Term;
    t.e = e;
    t.e_type = ct;
    t.sign = beta;
    t.with_q = gamma != 0;  // -gamma * beta == +1 for both differences
    auto term = [&](int adj) {
      KvBound x = t;
      x.adj = adj;
      return add(x);
    };
    Range r;
    r.ok = true;
    r.lo = open(-1);
    r.hi = open(+1);
    if (c == LT) r.has_hi = true, r.hi = term(-1);
    if (c == LE) r.has_hi = true, r.hi = term(0);
    if (c == GT) r.has_lo = true, r.lo = term(+1);
    if (c == GE) r.has_lo = true, r.lo = term(0);
    if (c == EQ) r.has_lo = r.has_hi = true, r.lo = term(0), r.hi = r.lo;
    return r;
  }

  Range meet(Range a, Range b) {  // a and b
    if (!a.ok || !b.ok) return {};
    if (a.row && b.row) return {};  // kv-free on both sides: the node itself was kv-free (never here)
    if (b.row) std::swap(a, b);
    Range r = b;
    if (a.row) {  // none of kv when the condition fails: hi = -open
      r.has_hi = true;
      r.hi = select(a.pred, a.neg, b.hi, open(-1));
      return r;
    }
    r.has_lo = a.has_lo || b.has_lo;
    r.has_hi = a.has_hi || b.has_hi;
    r.lo = !a.has_lo ? b.lo : !b.has_lo ? a.lo : extreme(KvBound::Max, a.lo, b.lo);
    r.hi = !a.has_hi ? b.hi : !b.has_hi ? a.hi : extreme(KvBound::Min, a.hi, b.hi);
    return r;
  }

  Range join(Range a, Range b) {  // a or b
    if (!a.ok || !b.ok) return {};
    if (a.row && b.row) return {};
    if (b.row) std::swap(a, b);
    if (a.row) {  // every kv when the condition holds
      Range r = b;
      r.lo = select(a.pred, a.neg, open(-1), b.lo);
      r.hi = select(a.pred, a.neg, open(+1), b.hi);
      return r;
    }
    Range r;
    r.ok = true;
    if (!a.has_lo && !b.has_lo) {  // both [-open, hi]: the union is [-open, max hi]
      r.lo = a.lo;
      r.has_hi = a.has_hi && b.has_hi;
      r.hi = r.has_hi ? extreme(KvBound::Max, a.hi, b.hi) : open(+1);
      return r;
    }
    if (!a.has_hi && !b.has_hi) {
      r.hi = a.hi;
      r.has_lo = a.has_lo && b.has_lo;
      r.lo = r.has_lo ? extreme(KvBound::Min, a.lo, b.lo) : open(-1);
      return r;
    }
    return {};  // two ranges with a possible gap between them
  }
};

}  // namespace

KvRange kv_range(const Expr& mask_mod) {
  if (mask_mod.empty()) return {};
  Builder b(mask_mod);
  Builder::Range r = b.range_of(b.build(mask_mod.ptr(), false));
  if (!r.ok) return {};
  b.out.lo = r.lo;
  b.out.hi = r.hi;
  return b.out;
}

namespace {

// A plain recursion: as a std::function (captures too large for its small buffer) every row's call allocated.
int64_t eval_bound(const KvRange& r, int i, int64_t q_idx, const std::function<Value(const NodePtr&)>& value) {
  const KvBound& n = r.nodes[size_t(i)];
  switch (n.kind) {
    case KvBound::Open: return n.sign * kKvOpen;
    case KvBound::Term: {
      const Value v = value(n.e);
      // As the comparison converts e (eval.cc convert): i32 wraps, i64 as is.
      int64_t e = v.i;
      if (n.e_type == DType::I32) e = int64_t(int32_t(uint32_t(uint64_t(e))));
      e = e < -kKvSat ? -kKvSat : e > kKvSat ? kKvSat : e;
      return (n.with_q ? q_idx : 0) + n.sign * e + n.adj;
    }
    case KvBound::Max: return std::max(eval_bound(r, n.a, q_idx, value), eval_bound(r, n.b, q_idx, value));
    case KvBound::Min: return std::min(eval_bound(r, n.a, q_idx, value), eval_bound(r, n.b, q_idx, value));
    case KvBound::Select:
      return eval_bound(r, (value(n.pred).as_bool() != n.pred_neg) ? n.a : n.b, q_idx, value);
  }
  return 0;
}

}  // namespace

std::pair<int64_t, int64_t> eval_kv_range(const KvRange& r, int64_t q_idx,
                                          const std::function<Value(const NodePtr&)>& value) {
  return {eval_bound(r, r.lo, q_idx, value), eval_bound(r, r.hi, q_idx, value)};
}

}  // namespace flexattn::ir
