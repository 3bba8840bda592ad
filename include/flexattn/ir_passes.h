#pragma once
// Passes over the mod IR. Each pass keeps meaning: eval(pass(e)) == eval(e) for every environment
// (bitwise for ints and bools; for floats up to the rounding the pass documents).
#include <string>
#include <vector>

#include "flexattn/expr.h"

namespace flexattn::ir {

// Throws flexattn::Error naming the problem (wrong operand type, buffer used with two dtypes or
// ranks, non-integer index, ...). `what` names the mod in messages ("score_mod", "mask_mod").
void verify(const Expr& e, const std::string& what);
// Checks a score_mod returns a number and a mask_mod returns Bool (and may not read `score`).
void verify_score_mod(const Expr& e);
void verify_mask_mod(const Expr& e);

// Constant folding and algebraic simplification (rules as data; see src/ir/simplify_rules.cc).
Expr simplify(const Expr& e);

// Symbolic derivative of a score_mod.
struct LoadGrad {
  Expr load;        // the Load node (its indices say where the gradient goes)
  Expr derivative;  // d score_mod / d load, an expression over the same inputs
};
struct ScoreModGrad {
  Expr d_score;                 // d score_mod / d score (simplified)
  std::vector<LoadGrad> loads;  // one per distinct Load of a float buffer named in `buffers`
};
// `grad_buffers`: buffers whose gradient is wanted (others are treated as constants).
ScoreModGrad differentiate(const Expr& score_mod, const std::vector<std::string>& grad_buffers);

}  // namespace flexattn::ir
