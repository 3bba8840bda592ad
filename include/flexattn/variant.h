#pragma once
// An attention variant at the IR level: what the user wrote, before any backend sees it.
#include <map>
#include <string>
#include <vector>

#include "flexattn/error.h"
#include "flexattn/expr.h"

namespace flexattn {

struct Variant {
  ir::Expr score_mod;                     // empty = identity
  ir::Expr mask_mod;                      // empty = attend everywhere
  std::vector<std::string> grad_buffers;  // captured buffers whose gradient is wanted
};

// Runtime values bound to a variant: named scalars and captured buffers (host views).
struct ModBindings {
  std::map<std::string, double> scalars;
  std::map<std::string, ir::BufferView> buffers;
};

// An interpreter environment reading `b` (which must outlive it). A scalar missing from `b` throws flexattn::Error.
inline ir::EvalEnv eval_env(const ModBindings& b) {
  ir::EvalEnv env;
  env.scalar = [&b](const std::string& n) {
    auto it = b.scalars.find(n);
    if (it == b.scalars.end()) throw Error("scalar '" + n + "' is used by the mod but no value was given");
    return it->second;
  };
  env.buffer = [&b](const std::string& n) -> const ir::BufferView* {
    auto it = b.buffers.find(n);
    return it == b.buffers.end() ? nullptr : &it->second;
  };
  return env;
}

}  // namespace flexattn
