// kv_range_row_fn (flexattn/cpu_variant.h): host block masks of kv-range masks from each row's bounds.
#include <atomic>
#include <cstdint>
#include <tuple>

#include "flexattn/cpu_variant.h"
#include "flexattn/ir_passes.h"

namespace flexattn::cpu {

MaskRowFn kv_range_row_fn(const ir::Expr& mask_mod, const ModBindings& bindings) {
  if (mask_mod.empty()) return {};
  auto range = std::make_shared<const ir::KvRange>(ir::kv_range(ir::simplify(mask_mod)));
  if (!range->ok()) return {};
  const ir::EvalEnv env = eval_env(bindings);
  // build_block_mask asks for one row's kv blocks one after the other on one thread: the bounds of the row
  // last seen are kept per thread, tagged with this function's id so another mask's rows never hit them.
  static std::atomic<uint64_t> ids{0};
  const uint64_t id = ++ids;
  return [range, env, id](int64_t b, int64_t h, int64_t q, int64_t kv_begin, int64_t kv_end, uint8_t* out) {
    thread_local uint64_t last_id = 0;
    thread_local int64_t last_b = -1, last_h = -1, last_q = -1, lo = 0, hi = -1;
    if (last_id != id || last_b != b || last_h != h || last_q != q) {
      ir::EvalEnv row = env;
      row.b = b, row.h = h, row.q_idx = q;
      std::tie(lo, hi) = ir::eval_kv_range(*range, q, [&](const ir::NodePtr& n) { return ir::eval(ir::Expr(n), row); });
      last_id = id, last_b = b, last_h = h, last_q = q;
    }
    for (int64_t kv = kv_begin; kv < kv_end; ++kv) out[kv - kv_begin] = lo <= kv && kv <= hi;
  };
}

}  // namespace flexattn::cpu
