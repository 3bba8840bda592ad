// simplify(): bottom-up constant folding and rule rewriting to a fixed point, memoized over the DAG.
//
// Every node of the result is a fixed point (its operands are simplified and neither folding nor
// any rule applies to it), so simplify(simplify(e)) == simplify(e). Rules only ever shrink the tree,
// so rewriting terminates.
//
// A replacement must have the node's type, and for integer types also its weakness: eval promotes
// comparison operands from their (type, weak) pair, so a strong i64 standing in for a weak one
// could change how a parent comparison converts its other operand. For bool and f32 the weakness
// cannot change any promotion (one type per category), so it may differ there.
#include <unordered_map>
#include <unordered_set>

#include "flexattn/ir_passes.h"
#include "simplify_rules.h"

namespace flexattn::ir {


namespace {

class Simplifier {
 public:
  Simplifier() = default;
  Simplifier(const Simplifier&) = delete;
  Simplifier& operator=(const Simplifier&) = delete;

  // Walks the DAG in post-order (operands first) without recursion: tracers can produce very long
  // chains. Only replacements recurse, and they are at most a node or two over fixed points.
  Expr run_all(const Expr& root) {
    const std::vector<const Node*> order = topo_order(root);
    std::unordered_map<const Node*, Expr> handle{{root.get(), root}};
    for (const Node* n : order)
      for (const auto& a : n->args) handle.emplace(a.get(), Expr(a));
    for (const Node* n : order) run(handle.at(n));
    return run(root);
  }

  Expr run(const Expr& e) {
    auto it = memo_.find(e.get());
    if (it != memo_.end()) return it->second.second;
    const Node& n = *e;
    std::vector<Expr> args;
    bool changed = false;
    for (const auto& a : n.args) {
      args.push_back(run(Expr(a)));
      changed |= args.back().get() != a.get();
    }
    Expr cur = changed ? make_node(n.op, n.type, n.weak, args, n.value, n.name, n.buffer_dtype) : e;
    Expr out = cur.get() == e.get() ? rewrite(cur) : run(cur);
    remember(e, out);
    remember(out, out);
    return out;
  }

 private:
  // One step at the top of `e`, whose operands are already fixed points.
  Expr rewrite(const Expr& e) {
    if (auto lit = rules::fold_constants(e)) return *lit;
    for (const auto& rule : rules::simplify_rules()) {
      rules::Match m;
      m.node = e.get();
      if (!rules::match(rule.pattern, e, &m)) continue;
      if (rule.when && !rule.when(m)) continue;
      Expr r = rule.build(m);
      if (!r.get() || r.get() == e.get() || r->type != e->type) continue;
      if (is_int(e->type) && r->weak != e->weak) continue;
      // The replacement may be a new node over fixed points: simplify it in turn.
      return run(r);
    }
    return e;
  }
  // Keys are raw pointers; the stored key keeps its node alive so an address is never reused.
  void remember(const Expr& key, const Expr& value) { memo_.emplace(key.get(), std::make_pair(key, value)); }

  std::unordered_map<const Node*, std::pair<Expr, Expr>> memo_;
};

}  // namespace

Expr simplify(const Expr& e) {
  if (!e.get()) return e;
  Simplifier s;
  return s.run_all(e);
}

}  // namespace flexattn::ir
