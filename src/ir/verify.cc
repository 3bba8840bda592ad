// The IR verifier: every node is something eval() and the code generators define. The typing
// rules are those of the builders in expr.cc (torch promotion), so anything the builders produce
// passes, and nodes made by make_node (simplifier, derivative, `@op` text) are checked to match.
#include <cmath>
#include <map>
#include <unordered_map>

#include "flexattn/error.h"
#include "flexattn/ir_passes.h"
#include "flexattn/ir_text.h"

namespace flexattn::ir {
namespace {

constexpr size_t kMaxShownChars = 160;

bool is_value_type(DType t) { return t == DType::Bool || t == DType::I32 || t == DType::I64 || t == DType::F32; }
bool is_number(DType t) { return t == DType::I32 || t == DType::I64 || t == DType::F32; }
std::string name_of(DType t) { return std::string(dtype_name(t)); }
std::string indices_text(size_t n) { return std::to_string(n) + (n == 1 ? " index" : " indices"); }

// One line of text for a node in a message (long expressions are cut: a message is not a dump).
std::string shown(const NodePtr& n) {
  std::string s;
  try {
    s = print(Expr(n));
  } catch (const std::exception&) {
    s = op_name(n->op);
  }
  // The node itself first, then any bindings print() put before it.
  const size_t last = s.rfind('\n');
  if (last != std::string::npos) s = s.substr(last + 1) + " where " + s.substr(0, last);
  for (char& c : s)
    if (c == '\n') c = ' ';
  if (s.size() > kMaxShownChars) s = s.substr(0, kMaxShownChars) + " ...";
  return s;
}

class Verifier {
 public:
  explicit Verifier(const std::string& what) : what_(what) {}

  void run(const Expr& e) {
    if (e.empty()) throw Error(what_ + ": the expression is empty");
    // Post-order with owning pointers (messages print the offending node).
    std::vector<NodePtr> order;
    std::unordered_map<const Node*, bool> seen;
    std::vector<std::pair<NodePtr, size_t>> stack{{e.ptr(), 0}};
    seen[e.get()] = true;
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (next < n->args.size()) {
        const NodePtr& c = n->args[next++];
        if (!seen[c.get()]) {
          seen[c.get()] = true;
          stack.push_back({c, 0});
        }
      } else {
        order.push_back(n);
        stack.pop_back();
      }
    }
    for (const NodePtr& n : order) check(n);
  }

 private:
  [[noreturn]] void fail(const NodePtr& n, const std::string& problem) const {
    throw Error(what_ + ": " + problem + ", at: " + shown(n));
  }
  void require(bool ok, const NodePtr& n, const std::string& problem) const {
    if (!ok) fail(n, problem);
  }
  std::string quoted_op(const Node& n) const { return std::string("'") + op_name(n.op) + "'"; }
  DType arg_type(const Node& n, size_t i) const { return n.args[i]->type; }

  void check(const NodePtr& p) {
    const Node& n = *p;
    require(is_value_type(n.type), p,
            quoted_op(n) + " has type " + name_of(n.type) + " (values are bool, i32, i64 or f32)");
    const int arity = op_arity(n.op);
    require(arity < 0 || int(n.args.size()) == arity, p,
            quoted_op(n) + " takes " + std::to_string(arity) + " operands, has " + std::to_string(n.args.size()));
    switch (n.op) {
      case Op::Score: require(n.type == DType::F32, p, "'score' must have type f32"); break;
      case Op::Batch: case Op::Head: case Op::QIdx: case Op::KvIdx:
        require(n.type == DType::I32, p, quoted_op(n) + " must have type i32");
        break;
      case Op::Literal: check_literal(p); break;
      case Op::Scalar: check_scalar(p); break;
      case Op::Load: check_load(p); break;
      case Op::Neg: case Op::Abs: case Op::Floor: case Op::Ceil:
        require(is_number(arg_type(n, 0)), p, quoted_op(n) + " needs a number, got " + name_of(arg_type(n, 0)));
        require(n.type == arg_type(n, 0), p, quoted_op(n) + " must keep its operand's type " + name_of(arg_type(n, 0)));
        break;
      case Op::Detach:
        require(n.type == arg_type(n, 0), p, "'detach' must keep its operand's type " + name_of(arg_type(n, 0)));
        break;
      case Op::Exp: case Op::Exp2: case Op::Log: case Op::Log2: case Op::Sqrt: case Op::Rsqrt:
      case Op::Tanh: case Op::TanhApprox: case Op::Sigmoid: case Op::Sin: case Op::Cos: case Op::Tan: case Op::Erf:
        require(n.type == DType::F32, p, quoted_op(n) + " must have type f32");
        break;
      case Op::Not:
        require(arg_type(n, 0) == DType::Bool, p, "'not' needs a bool operand, got " + name_of(arg_type(n, 0)));
        require(n.type == DType::Bool, p, "'not' must have type bool");
        break;
      case Op::Cast: break;
      case Op::Add: case Op::Sub: case Op::Mul: case Op::FloorDiv: case Op::Mod: case Op::Pow:
      case Op::Min: case Op::Max: {
        const DType t = promoted(p, 0);
        require(t != DType::Bool || n.op == Op::Min || n.op == Op::Max, p, quoted_op(n) + " is not defined for two bools");
        require(n.type == t, p, result_problem(n, t));
        break;
      }
      case Op::Div:
        require(promoted(p, 0) != DType::Bool, p, "'div' is not defined for two bools");
        require(n.type == DType::F32, p, "'div' must have type f32 (true division)");
        break;
      case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge:
        promoted(p, 0);
        require(n.type == DType::Bool, p, quoted_op(n) + " must have type bool");
        break;
      case Op::BitAnd: case Op::BitOr: case Op::Shl: case Op::Shr: {
        const DType t = promoted(p, 0);
        require(is_int(t), p, quoted_op(n) + " needs integer operands, got " + name_of(arg_type(n, 0)) + " and " +
                                  name_of(arg_type(n, 1)));
        require(n.type == t, p, result_problem(n, t));
        break;
      }
      case Op::And: case Op::Or:
        require(arg_type(n, 0) == DType::Bool && arg_type(n, 1) == DType::Bool, p,
                quoted_op(n) + " needs bool operands, got " + name_of(arg_type(n, 0)) + " and " + name_of(arg_type(n, 1)));
        require(n.type == DType::Bool, p, quoted_op(n) + " must have type bool");
        break;
      case Op::Select: {
        require(arg_type(n, 0) == DType::Bool, p, "'where' needs a bool condition, got " + name_of(arg_type(n, 0)));
        const DType t = promoted(p, 1);
        require(n.type == t, p, result_problem(n, t));
        break;
      }
    }
  }

  // The torch promotion of operands first and first + 1 (operand types were checked earlier).
  DType promoted(const NodePtr& p, size_t first) const {
    try {
      return promote(*p->args[first], *p->args[first + 1]);
    } catch (const Error& e) {
      fail(p, e.what());
    }
  }
  std::string result_problem(const Node& n, DType t) const {
    const size_t f = n.op == Op::Select ? 1 : 0;
    return quoted_op(n) + " of " + name_of(arg_type(n, f)) + " and " + name_of(arg_type(n, f + 1)) +
           " must have type " + name_of(t) + ", has " + name_of(n.type);
  }

  void check_literal(const NodePtr& p) {
    const Node& n = *p;
    const double v = n.value;
    switch (n.type) {
      case DType::Bool: require(v == 0.0 || v == 1.0, p, "a bool literal must be 0 or 1"); break;
      case DType::I32:
        require(v >= -2147483648.0 && v <= 2147483647.0 && v == std::trunc(v), p,
                "an i32 literal must be an integer in the range of i32");
        break;
      case DType::I64:
        require(v == std::trunc(v) && v >= -9223372036854775808.0 && v < 9223372036854775808.0, p,
                "an i64 literal must be an integer in the range of i64");
        break;
      default: break;
    }
  }

  void check_scalar(const NodePtr& p) {
    const Node& n = *p;
    require(!n.name.empty(), p, "a scalar must have a name");
    auto [it, fresh] = scalars_.emplace(n.name, n.type);
    require(fresh || it->second == n.type, p,
            "scalar '" + n.name + "' has type " + name_of(n.type) + " here and " + name_of(it->second) + " elsewhere");
  }

  void check_load(const NodePtr& p) {
    const Node& n = *p;
    const size_t rank = n.args.size();
    require(!n.name.empty(), p, "a load must name its buffer");
    require(rank >= 1 && rank <= 4, p, "buffer '" + n.name + "' is loaded with " + indices_text(rank) +
                                           " (1 to 4 are allowed)");
    require(n.buffer_dtype != DType::F64, p, "buffer '" + n.name + "' is f64 (buffers may not be f64)");
    for (size_t i = 0; i < rank; ++i)
      require(is_int(arg_type(n, i)), p,
              "index " + std::to_string(i) + " of buffer '" + n.name + "' must be an integer, got " +
                  name_of(arg_type(n, i)));
    const DType want = is_float(n.buffer_dtype) ? DType::F32 : n.buffer_dtype;
    require(n.type == want, p,
            "a load from " + name_of(n.buffer_dtype) + " buffer '" + n.name + "' must have type " + name_of(want));
    auto [it, fresh] = buffers_.emplace(n.name, std::make_pair(n.buffer_dtype, rank));
    if (fresh) return;
    require(it->second.first == n.buffer_dtype, p,
            "buffer '" + n.name + "' is loaded as " + name_of(n.buffer_dtype) + " here and as " +
                name_of(it->second.first) + " elsewhere");
    require(it->second.second == rank, p,
            "buffer '" + n.name + "' is loaded with " + indices_text(rank) + " here and " +
                indices_text(it->second.second) + " elsewhere");
  }

  std::string what_;
  std::map<std::string, DType> scalars_;
  std::map<std::string, std::pair<DType, size_t>> buffers_;
};

}  // namespace

void verify(const Expr& e, const std::string& what) { Verifier(what).run(e); }

void verify_score_mod(const Expr& e) {
  verify(e, "score_mod");
  if (!is_number(e.type()))
    throw Error("score_mod must return a number (f32, i32 or i64), got " + name_of(e.type()) + ": " + shown(e.ptr()));
}

void verify_mask_mod(const Expr& e) {
  verify(e, "mask_mod");
  if (e.type() != DType::Bool)
    throw Error("mask_mod must return bool, got " + name_of(e.type()) + ": " + shown(e.ptr()));
  if (depends_on(e, Op::Score)) throw Error("mask_mod must not use 'score': " + shown(e.ptr()));
}

}  // namespace flexattn::ir
