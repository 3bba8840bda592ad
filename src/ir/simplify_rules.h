#pragma once
// Internal to the simplifier: rewrite rules as data (pattern -> replacement, with a condition), the
// matcher, and constant folding. simplify.cc drives them; simplify_rules.cc lists the rules.
#include <array>
#include <optional>
#include <vector>

#include "flexattn/expr.h"

namespace flexattn::ir::rules {

constexpr int kMaxCaptures = 3;

// What a successful match binds: the node being rewritten and up to three captured operands.
struct Match {
  const Node* node = nullptr;
  std::array<Expr, kMaxCaptures> x;
};

using LitPred = bool (*)(const Node&);

// A tree pattern. `Any` captures a sub-expression in slot `slot`; a slot bound twice must bind the
// same node (hash-consing makes that structural equality). `Lit` matches a Literal whose value the
// predicate accepts. `Op` matches an op with argument patterns; `commutative` also tries the two
// arguments swapped.
struct Pat {
  enum class Kind { Any, Lit, Op } kind = Kind::Any;
  int slot = -1;
  LitPred lit = nullptr;
  Op op = Op::Score;
  bool commutative = false;
  std::vector<Pat> args;
};

struct Rule {
  const char* name;
  Pat pattern;
  bool (*when)(const Match&);  // extra condition on the bindings; nullptr = always
  Expr (*build)(const Match&);  // the replacement; an empty Expr declines
};

// Every rule, in the order they are tried.
const std::vector<Rule>& simplify_rules();
bool match(const Pat& p, const Expr& e, Match* m);

// All-literal operands -> one literal, computed by the interpreter, of the node's type and
// weakness. Declines when a literal cannot hold the value bit for bit (an I64 beyond 2^53).
std::optional<Expr> fold_constants(const Expr& e);


}  // namespace flexattn::ir::rules
