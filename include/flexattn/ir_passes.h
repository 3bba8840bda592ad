#pragma once
// Passes over the mod IR. Each pass keeps meaning: eval(pass(e)) == eval(e) for every environment
// (bitwise for ints and bools; for floats up to the rounding the pass documents).
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
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


// A mask_mod that keeps one interval of kv positions per query row: mask_mod(b, h, q, kv) == (lo <= kv && kv <= hi)
// for every q, kv in [0, 2^31), with lo, hi functions of (b, h, q_idx) built from the mask's own kv-free
// subexpressions (src/ir/kv_range.cc). The sm90 forward then tests a partial tile's entries against the row's
// bounds instead of evaluating mask_mod per entry (kernels/sm90/fwd_softmax_sm90.cuh, codegen's kKvRange).
// Recognised: comparisons (<, <=, >, >=, ==) of kv_idx, q_idx - kv_idx or kv_idx - q_idx (i32, or widened to i64)
// with an integer expression free of kv_idx; their negations; and / or / where over them and over kv-free
// conditions (up to 512 levels deep), where an `or` of two ranges only when both are open on the same side (causal
// or a prefix: kv <= max(q, P - 1)). Bounds and conditions with f32 values inside are refused (integer and boolean
// arithmetic only: exact on every target).
struct KvBound {
  enum Kind : uint8_t { Open, Term, Max, Min, Select };
  Kind kind = Open;
  int sign = 0;        // Open: -1 (below every kv) or +1 (above every kv); Term: the sign of e
  bool with_q = false; // Term: value = (with_q ? q_idx : 0) + sign * sat(e as e_type) + adj
  int adj = 0;         // Term: -1, 0, +1 (strict comparisons)
  NodePtr e;           // Term: kv-free integer expression, converted to e_type as the comparison converts it
  DType e_type = DType::I32;
  NodePtr pred;        // Select: kv-free Bool (negated when pred_neg) ? a : b
  bool pred_neg = false;
  int a = -1, b = -1;  // Max / Min / Select operands (indices into KvRange::nodes)
};
struct KvRange {
  std::vector<KvBound> nodes;
  int lo = -1, hi = -1;  // roots in nodes; empty nodes = not a range
  bool ok() const { return !nodes.empty(); }
};
// sat(e): e clamped to +-2^40 (changes no comparison with an index; keeps q_idx + sat(e) exact in 64 bits).
constexpr int64_t kKvSat = int64_t(1) << 40;
constexpr int64_t kKvOpen = int64_t(1) << 42;  // the value of an Open bound (times its sign)
// The range of a (simplified) mask_mod, or !ok().
KvRange kv_range(const Expr& mask_mod);
// The row's bounds; value(n) evaluates a kv-free node of the mask for the row (b, h, q_idx).
std::pair<int64_t, int64_t> eval_kv_range(const KvRange& r, int64_t q_idx, const std::function<Value(const NodePtr&)>& value);
// Each row's bounds of a kv-range mask as (b, h, q_idx) -> {lo, hi} (block_mask.h's MaskRowRangeFn, for
// build_block_mask_from_ranges: the same block mask, entry for entry, as evaluating the mask per entry;
// tests/cli/tool/test_check.cc). Empty when the mask is not one interval per row. Thread-safe. `env` gives the
// scalars and buffers (its b, h, q_idx are ignored); what it reads must outlive the function's use and keep its
// values while it is used (each thread keeps the row-independent values of the (b, h) it saw last).
using KvRangeRows = std::function<std::pair<int64_t, int64_t>(int64_t b, int64_t h, int64_t q_idx)>;
KvRangeRows kv_range_rows(const Expr& mask_mod, const EvalEnv& env);

}  // namespace flexattn::ir
