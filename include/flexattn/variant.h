#pragma once
// An attention variant at the IR level: what the user wrote, before any backend sees it.
#include <map>
#include <string>
#include <vector>

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

}  // namespace flexattn
