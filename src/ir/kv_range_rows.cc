// kv_range_rows (flexattn/ir_passes.h): each row's kv interval of a kv-range mask, for host block masks.
#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "flexattn/ir_passes.h"

namespace flexattn::ir {

KvRangeRows kv_range_rows(const Expr& mask_mod, const EvalEnv& env) {
  if (mask_mod.empty()) return {};
  auto range = std::make_shared<const KvRange>(kv_range(simplify(mask_mod)));
  if (!range->ok()) return {};
  // The bounds' kv-free parts (Term values, Select conditions): those without q_idx are the same for every row of a
  // (b, h) and evaluated once per (b, h) and thread; the others (causal's q_idx itself) by a compiled Evaluator per
  // row. Through ir::eval per row (its DAG walk allocates) a row cost ~300 ns, ~2.5 ms for causal at S = 8192.
  auto per_bh = std::make_shared<std::vector<NodePtr>>(), per_row = std::make_shared<std::vector<NodePtr>>();
  for (const KvBound& n : range->nodes) {
    const NodePtr& e = n.kind == KvBound::Term ? n.e : n.kind == KvBound::Select ? n.pred : nullptr;
    if (e) (depends_on(Expr(e), Op::QIdx) ? per_row : per_bh)->push_back(e);
  }
  static std::atomic<uint64_t> ids{0};
  const uint64_t id = ++ids;
  return [range, per_bh, per_row, env, id](int64_t b, int64_t h, int64_t q) {
    struct Cache {  // per thread, tagged with this function's id so that another mask's values are never used
      uint64_t id = 0;
      int64_t b = -1, h = -1;
      std::vector<std::pair<const Node*, Value>> values;      // per_bh's, for (b, h)
      std::vector<std::pair<const Node*, Evaluator>> rows;  // per_row's, bound to env
    };
    thread_local Cache cache;
    if (cache.id != id) {
      cache.rows.clear();
      for (const NodePtr& e : *per_row) {
        cache.rows.emplace_back(e.get(), Evaluator(Expr(e)));
        cache.rows.back().second.bind(env);
      }
      cache.b = cache.h = -1;
    }
    if (cache.id != id || cache.b != b || cache.h != h) {
      EvalEnv at = env;
      at.b = b, at.h = h;
      cache.values.clear();
      for (const NodePtr& e : *per_bh) cache.values.emplace_back(e.get(), eval(Expr(e), at));
      cache.id = id, cache.b = b, cache.h = h;
    }
    return eval_kv_range(*range, q, [&](const NodePtr& n) {
      for (const auto& [node, v] : cache.values)
        if (node == n.get()) return v;
      for (auto& [node, ev] : cache.rows)
        if (node == n.get()) return ev.run(0.0, b, h, q, 0);
      return eval(Expr(n), env);  // not reached: every bound's node is in one of the lists
    });
  };
}

}  // namespace flexattn::ir
