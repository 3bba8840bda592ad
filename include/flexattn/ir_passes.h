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

// How a value depends on the positions, from the DAG's structure alone (literal values play no part,
// so the answer never differs between variants that differ only in a literal):
//   None      no q_idx, kv_idx or score: the same for every entry of a (b, h) (b, h, literals,
//             scalars, loads at such indices);
//   Diagonal  q_idx and kv_idx only through q_idx - kv_idx: f(q + k, kv + k) == f(q, kv) for valid
//             positions (relative bias bias[h, q_idx - kv_idx + S - 1], T5's bucket(kv_idx - q_idx));
//   General   anything else (reads score, or the positions otherwise).
// Sound, not complete: a Diagonal answer is exact under the interpreter's arithmetic (src/ir/eval.cc),
// a General one may be conservative (e.g. q_idx * 2 - kv_idx * 2). Codegen uses it to let the kernels
// sum buffer-gradient contributions along diagonals before one atomic per index (src/codegen).
enum class PositionDependence { None, Diagonal, General };
PositionDependence position_dependence(const Expr& e);

}  // namespace flexattn::ir
