// Node construction: hash-consing, torch type promotion, and the typed builders of expr.h.
#include "flexattn/expr.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "flexattn/error.h"

namespace flexattn::ir {

namespace {

struct OpInfo {
  const char* name;
  int arity;
};
constexpr OpInfo kOps[] = {
#define FLEXATTN_OP(name, arity, text) {text, arity},
#include "flexattn/ir_nodes.def"
#undef FLEXATTN_OP
};

uint64_t mix(uint64_t h, uint64_t v) {
  // splitmix64-style combine: cheap and well distributed.
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 29);
}

uint64_t double_bits(double v) {
  uint64_t u;
  std::memcpy(&u, &v, 8);
  return u;
}

uint64_t string_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Hash-consing table. Entries are weak so expressions nobody holds are freed; dead entries are
// swept when a bucket is touched.
struct InternTable {
  std::mutex mu;
  std::unordered_map<uint64_t, std::vector<std::weak_ptr<const Node>>> buckets;
};
InternTable& table() {
  static InternTable* t = new InternTable();  // never destroyed: nodes may outlive static dtors
  return *t;
}

bool same_node(const Node& a, const Node& b) {
  if (a.op != b.op || a.type != b.type || a.weak != b.weak || a.name != b.name ||
      a.buffer_dtype != b.buffer_dtype || a.args.size() != b.args.size())
    return false;
  if (double_bits(a.value) != double_bits(b.value)) return false;
  for (size_t i = 0; i < a.args.size(); ++i)
    if (a.args[i] != b.args[i]) return false;
  return true;
}

int category(DType t) { return t == DType::Bool ? 0 : (is_int(t) ? 1 : 2); }

std::string type_str(const Node& n) {
  return std::string(dtype_name(n.type)) + (n.weak ? " (python scalar)" : "");
}

[[noreturn]] void type_error(Op op, const std::string& what) {
  throw Error(std::string("'") + op_name(op) + "': " + what);
}

}  // namespace

Node::~Node() {
  if (args.empty()) return;
  std::vector<NodePtr> stack = std::move(args);
  while (!stack.empty()) {
    NodePtr n = std::move(stack.back());
    stack.pop_back();
    if (n->args.empty()) continue;
    {
      // Under the intern mutex no other thread can revive `n` through its weak table entry between
      // the use_count check and taking its operands.
      std::lock_guard<std::mutex> lock(table().mu);
      if (n.use_count() == 1) {
        auto& owned = const_cast<Node&>(*n).args;
        for (NodePtr& a : owned) stack.push_back(std::move(a));
        owned.clear();
      }
    }
    // `n` is released here with no operands left to recurse into (or it is still shared).
  }
}

const char* op_name(Op op) { return kOps[int(op)].name; }
int op_arity(Op op) { return kOps[int(op)].arity; }

Expr make_node(Op op, DType type, bool weak, std::vector<Expr> args, double value, const std::string& name,
               DType buffer_dtype) {
  const int arity = op_arity(op);
  if (arity >= 0 && int(args.size()) != arity)
    throw Error(std::string("internal: '") + op_name(op) + "' takes " + std::to_string(arity) + " operands, got " +
                std::to_string(args.size()));
  for (const Expr& a : args)
    if (a.empty()) throw Error(std::string("internal: '") + op_name(op) + "' got an empty operand");
  if (op != Op::Literal) value = 0.0;
  if (op != Op::Load) buffer_dtype = DType::F32;
  auto node = std::make_shared<Node>();
  node->op = op;
  node->type = type;
  node->weak = weak;
  node->value = value;
  node->name = name;
  node->buffer_dtype = buffer_dtype;
  uint64_t h = mix(uint64_t(op) + 1, uint64_t(type) * 4 + (weak ? 2 : 0));
  h = mix(h, double_bits(value));
  h = mix(h, string_hash(name));
  h = mix(h, uint64_t(buffer_dtype));
  for (const Expr& a : args) {
    node->args.push_back(a.ptr());
    h = mix(h, a->hash);
  }
  node->hash = h;

  InternTable& t = table();
  // Candidates locked from the table are kept here and released only after the mutex: releasing the
  // last owner runs ~Node, which takes the same mutex.
  std::vector<NodePtr> seen;
  std::lock_guard<std::mutex> lock(t.mu);
  auto& bucket = t.buckets[h];
  for (size_t i = 0; i < bucket.size();) {
    if (auto existing = bucket[i].lock()) {
      seen.push_back(existing);
      if (same_node(*existing, *node)) return Expr(existing);
      ++i;
    } else {
      bucket[i] = bucket.back();
      bucket.pop_back();
    }
  }
  bucket.push_back(node);
  return Expr(NodePtr(node));
}

// ---- leaves ---------------------------------------------------------------------------------------
Expr score() { return make_node(Op::Score, DType::F32, false, {}); }
Expr batch() { return make_node(Op::Batch, DType::I32, false, {}); }
Expr head() { return make_node(Op::Head, DType::I32, false, {}); }
Expr q_idx() { return make_node(Op::QIdx, DType::I32, false, {}); }
Expr kv_idx() { return make_node(Op::KvIdx, DType::I32, false, {}); }

Expr literal(double v, DType type, bool weak) {
  switch (type) {
    case DType::Bool: v = (v != 0.0) ? 1.0 : 0.0; break;
    case DType::I32:
    case DType::I64:
      if (!std::isfinite(v)) throw Error("literal: an integer literal must be finite");
      v = std::trunc(v) + 0.0;  // (+ 0.0: an integer has no signed zero; -0 was another node and cache key)
      // Integer literals travel as doubles (the ModParams slot type): |v| must stay below 2^63.
      if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
        throw Error("literal: integer literal out of the int64 range");
      if (type == DType::I32) v = double(int32_t(uint32_t(int64_t(v))));
      break;
    case DType::F32: break;
    default: throw Error("literal: type must be bool, i32, i64 or f32, got " + std::string(dtype_name(type)));
  }
  return make_node(Op::Literal, type, weak, {}, v);
}

Expr scalar(const std::string& name, DType type) {
  if (name.empty()) throw Error("scalar: the name must not be empty");
  if (type != DType::F32 && type != DType::I32 && type != DType::I64 && type != DType::Bool)
    throw Error("scalar '" + name + "': type must be bool, i32, i64 or f32, got " + std::string(dtype_name(type)));
  return make_node(Op::Scalar, type, false, {}, 0.0, name);
}

Expr load(const std::string& buffer, DType dtype, const std::vector<Expr>& indices) {
  if (buffer.empty()) throw Error("load: the buffer name must not be empty");
  if (indices.empty() || indices.size() > 4)
    throw Error("buffer '" + buffer + "': a load takes 1 to 4 indices, got " + std::to_string(indices.size()));
  if (dtype == DType::F64) throw Error("buffer '" + buffer + "': f64 buffers are not supported (use f32)");
  for (size_t i = 0; i < indices.size(); ++i)
    if (indices[i].empty() || !is_int(indices[i].type()))
      throw Error("buffer '" + buffer + "': index " + std::to_string(i) + " must be an integer, got " +
                  (!indices[i].empty() ? type_str(*indices[i]) : std::string("nothing")));
  DType t = is_float(dtype) ? DType::F32 : dtype;
  return make_node(Op::Load, t, false, indices, 0.0, buffer, dtype);
}

Expr::Expr(double v) : Expr(literal(v, DType::F32, true)) {}
Expr::Expr(int v) : Expr(literal(v, DType::I64, true)) {}
// Literals hold doubles, exact for every integer up to 2^53 in magnitude: past that an int64 would be rounded silently
// (a 64-bit bitmask 0x5555555555555555 became ...6864), so such values are refused as the parser and Python refuse them.
static double exact_int_literal(int64_t v) {
  const double d = double(v);
  if (d >= 0x1p63 || int64_t(d) != v)
    throw Error("literal: the integer " + std::to_string(v) + " is not exact in the IR, which keeps literals as "
                "doubles (every integer up to 2^53 in magnitude is): build it from smaller parts, e.g. (a << 32) | b");
  return d;
}
Expr::Expr(int64_t v) : Expr(literal(exact_int_literal(v), DType::I64, true)) {}
Expr::Expr(bool v) : Expr(literal(v ? 1.0 : 0.0, DType::Bool, true)) {}
Expr Expr::unsigned_literal(uint64_t v) {
  if (v > uint64_t(INT64_MAX))
    throw Error("literal: the integer " + std::to_string(v) + " is beyond the int64 range (at most 2^63 - 1)");
  return Expr(int64_t(v));
}

// ---- promotion ------------------------------------------------------------------------------------
DType promote(const Node& a, const Node& b, bool* weak_out) {
  const int ca = category(a.type), cb = category(b.type);
  const int c = std::max(ca, cb);
  const bool both_weak = a.weak && b.weak;
  if (weak_out) *weak_out = both_weak;
  DType strong = DType::Bool;
  bool have_strong = false;
  for (const Node* n : {&a, &b}) {
    if (!n->weak && category(n->type) == c) {
      if (!have_strong || n->type == DType::I64) strong = n->type;
      have_strong = true;
    }
  }
  if (have_strong) return strong;
  if (both_weak && ca == cb && a.type == b.type) return a.type;
  return c == 2 ? DType::F32 : (c == 1 ? DType::I64 : DType::Bool);
}

Expr unary(Op op, Expr a) {
  if (a.empty()) throw Error(std::string("'") + op_name(op) + "': empty operand");
  const Node& n = *a;
  switch (op) {
    case Op::Neg:
    case Op::Abs:
      if (n.type == DType::Bool) type_error(op, "not defined for bool (cast to a number first)");
      return make_node(op, n.type, n.weak, {a});
    case Op::Exp: case Op::Exp2: case Op::Log: case Op::Log2: case Op::Sqrt: case Op::Rsqrt:
    case Op::Tanh: case Op::TanhApprox: case Op::Sigmoid: case Op::Sin: case Op::Cos: case Op::Tan: case Op::Erf:
      return make_node(op, DType::F32, n.weak, {a});
    case Op::Floor:
    case Op::Ceil:
      if (n.type == DType::Bool) type_error(op, "not defined for bool");
      if (is_int(n.type)) return a;  // floor/ceil of an integer is itself (torch returns the input)
      return make_node(op, n.type, n.weak, {a});
    case Op::Detach:
      return make_node(op, n.type, n.weak, {a});
    case Op::Not:
      if (n.type != DType::Bool)
        type_error(op, "expects a bool operand, got " + type_str(n) + " (compare it first, e.g. x != 0)");
      return make_node(op, DType::Bool, n.weak, {a});
    default:
      break;
  }
  throw Error(std::string("internal: '") + op_name(op) + "' is not a unary operation");
}

namespace {
bool wide_int_literal(const Node& n) {
  return n.op == Op::Literal && n.weak && n.type == DType::I64 && !(n.value >= -2147483648.0 && n.value < 2147483648.0);
}

// A plain integer beyond 32 bits (2^40, a hash multiplier 2654435761) meeting an i32 value widens that value to
// i64, as Triton types such a constant and as the Python builder (_ir._widened) does; promotion alone keeps i32
// and would wrap the constant silently. The cast is explicit in the IR so every backend and the simplifier agree.
void widen(Expr& a, Expr& b) {
  if (wide_int_literal(*b) && a.type() == DType::I32)
    a = cast(a, DType::I64);
  else if (wide_int_literal(*a) && b.type() == DType::I32)
    b = cast(b, DType::I64);
}
}  // namespace

Expr binary(Op op, Expr a, Expr b) {
  if (a.empty() || b.empty()) throw Error(std::string("'") + op_name(op) + "': empty operand");
  widen(a, b);
  bool weak = false;
  DType t = promote(*a, *b, &weak);
  switch (op) {
    case Op::Add: case Op::Sub: case Op::Mul: case Op::FloorDiv: case Op::Mod: case Op::Pow:
      if (t == DType::Bool) type_error(op, "not defined for two bools (use && / || or cast first)");
      return make_node(op, t, weak, {a, b});
    case Op::Div:
      if (t == DType::Bool) type_error(op, "not defined for two bools");
      return make_node(op, DType::F32, weak, {a, b});  // true division
    case Op::Min: case Op::Max:
      return make_node(op, t, weak, {a, b});
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge:
      return make_node(op, DType::Bool, weak, {a, b});
    case Op::And: case Op::Or:
      if (a.type() != DType::Bool || b.type() != DType::Bool)
        type_error(op, "expects bool operands, got " + type_str(*a) + " and " + type_str(*b));
      return make_node(op, DType::Bool, weak, {a, b});
    case Op::BitAnd: case Op::BitOr: case Op::Shl: case Op::Shr:
      if (t != DType::I32 && t != DType::I64)
        type_error(op, "expects integer operands, got " + type_str(*a) + " and " + type_str(*b) +
                           (t == DType::Bool ? " (for bools use and / or)" : ""));
      return make_node(op, t, weak, {a, b});
    default:
      break;
  }
  throw Error(std::string("internal: '") + op_name(op) + "' is not a binary operation");
}

Expr select(Expr cond, Expr a, Expr b) {
  if (cond.empty() || a.empty() || b.empty()) throw Error("'where': empty operand");
  if (cond.type() != DType::Bool)
    throw Error("'where': the condition must be bool, got " + type_str(*cond));
  widen(a, b);
  bool weak = false;
  DType t = promote(*a, *b, &weak);
  return make_node(Op::Select, t, weak, {cond, a, b});
}

Expr cast(Expr a, DType to) {
  if (a.empty()) throw Error("'cast': empty operand");
  if (to != DType::Bool && to != DType::I32 && to != DType::I64 && to != DType::F32)
    throw Error("'cast': target must be bool, i32, i64 or f32, got " + std::string(dtype_name(to)));
  if (a.type() == to && !a->weak) return a;
  return make_node(Op::Cast, to, false, {a});
}

Expr operator+(Expr a, Expr b) { return binary(Op::Add, a, b); }
Expr operator-(Expr a, Expr b) { return binary(Op::Sub, a, b); }
Expr operator*(Expr a, Expr b) { return binary(Op::Mul, a, b); }
Expr operator/(Expr a, Expr b) { return binary(Op::Div, a, b); }
Expr operator%(Expr a, Expr b) { return binary(Op::Mod, a, b); }
Expr operator-(Expr a) { return unary(Op::Neg, a); }
Expr operator!(Expr a) { return unary(Op::Not, a); }
Expr operator&&(Expr a, Expr b) { return binary(Op::And, a, b); }
Expr operator||(Expr a, Expr b) { return binary(Op::Or, a, b); }
// torch semantics: logical on two bools, bitwise on integers.
namespace {
bool both_given_int(const Expr& a, const Expr& b) { return !a.empty() && !b.empty() && is_int(promote(*a, *b)); }
}  // namespace
Expr operator&(Expr a, Expr b) { return binary(both_given_int(a, b) ? Op::BitAnd : Op::And, a, b); }
Expr operator|(Expr a, Expr b) { return binary(both_given_int(a, b) ? Op::BitOr : Op::Or, a, b); }
Expr operator^(Expr a, Expr b) {
  if (both_given_int(a, b)) return bitwise_xor(a, b);
  if (a.empty() || b.empty() || a.type() != DType::Bool || b.type() != DType::Bool)
    throw Error("'^': expects two bools or two integers, got " + (a.empty() ? std::string("nothing") : type_str(*a)) +
                " and " + (b.empty() ? std::string("nothing") : type_str(*b)));
  return binary(Op::Ne, a, b);
}
Expr operator~(Expr a) { return !a.empty() && is_int(a.type()) ? bitwise_not(a) : unary(Op::Not, a); }
Expr bitwise_and(Expr a, Expr b) { return binary(Op::BitAnd, a, b); }
Expr bitwise_or(Expr a, Expr b) { return binary(Op::BitOr, a, b); }
// (a | b) - (a & b): the bits set in exactly one (a | b is the disjoint sum of a ^ b and a & b).
Expr bitwise_xor(Expr a, Expr b) { return binary(Op::Sub, bitwise_or(a, b), bitwise_and(a, b)); }
// -a - 1 in two's complement (wrapping).
Expr bitwise_not(Expr a) {
  if (a.empty() || !is_int(a.type())) return unary(Op::Not, a);  // Not's own error for anything but bool
  return binary(Op::Sub, unary(Op::Neg, a), literal(1, DType::I64, true));  // a Python 1, as the tracer's
}
Expr bitwise_left_shift(Expr a, Expr b) { return binary(Op::Shl, a, b); }
Expr bitwise_right_shift(Expr a, Expr b) { return binary(Op::Shr, a, b); }
Expr operator==(Expr a, Expr b) { return binary(Op::Eq, a, b); }
Expr operator!=(Expr a, Expr b) { return binary(Op::Ne, a, b); }
Expr operator<(Expr a, Expr b) { return binary(Op::Lt, a, b); }
Expr operator<=(Expr a, Expr b) { return binary(Op::Le, a, b); }
Expr operator>(Expr a, Expr b) { return binary(Op::Gt, a, b); }
Expr operator>=(Expr a, Expr b) { return binary(Op::Ge, a, b); }

Expr floordiv(Expr a, Expr b) { return binary(Op::FloorDiv, a, b); }
Expr mod(Expr a, Expr b) { return binary(Op::Mod, a, b); }
Expr neg(Expr a) { return unary(Op::Neg, a); }
Expr abs(Expr a) { return unary(Op::Abs, a); }
Expr exp(Expr a) { return unary(Op::Exp, a); }
Expr exp2(Expr a) { return unary(Op::Exp2, a); }
Expr log(Expr a) { return unary(Op::Log, a); }
Expr log2(Expr a) { return unary(Op::Log2, a); }
Expr sqrt(Expr a) { return unary(Op::Sqrt, a); }
Expr rsqrt(Expr a) { return unary(Op::Rsqrt, a); }
Expr tanh(Expr a) { return unary(Op::Tanh, a); }
Expr tanh_approx(Expr a) { return unary(Op::TanhApprox, a); }
Expr sigmoid(Expr a) { return unary(Op::Sigmoid, a); }
Expr sin(Expr a) { return unary(Op::Sin, a); }
Expr cos(Expr a) { return unary(Op::Cos, a); }
Expr tan(Expr a) { return unary(Op::Tan, a); }
Expr erf(Expr a) { return unary(Op::Erf, a); }
Expr floor(Expr a) { return unary(Op::Floor, a); }
Expr detach(Expr a) { return unary(Op::Detach, a); }
Expr ceil(Expr a) { return unary(Op::Ceil, a); }
Expr minimum(Expr a, Expr b) { return binary(Op::Min, a, b); }
Expr maximum(Expr a, Expr b) { return binary(Op::Max, a, b); }
Expr pow(Expr a, Expr b) { return binary(Op::Pow, a, b); }
Expr where(Expr c, Expr a, Expr b) { return select(c, a, b); }

// ---- structure ------------------------------------------------------------------------------------
std::vector<const Node*> topo_order(const Expr& root) {
  std::vector<const Node*> order;
  if (root.empty()) return order;
  std::set<const Node*> seen;
  // Iterative post-order: deep expressions (long chains from tracers) must not overflow the stack.
  std::vector<std::pair<const Node*, size_t>> stack{{root.get(), 0}};
  seen.insert(root.get());
  while (!stack.empty()) {
    auto& [n, next] = stack.back();
    if (next < n->args.size()) {
      const Node* child = n->args[next++].get();
      if (seen.insert(child).second) stack.push_back({child, 0});
    } else {
      order.push_back(n);
      stack.pop_back();
    }
  }
  return order;
}

std::vector<const Node*> literal_slots(const Expr& root) {
  std::vector<const Node*> lits;
  for (const Node* n : topo_order(root))
    if (n->op == Op::Literal) lits.push_back(n);
  return lits;
}

std::vector<std::string> scalar_names(const Expr& root) {
  std::set<std::string> names;
  for (const Node* n : topo_order(root))
    if (n->op == Op::Scalar) names.insert(n->name);
  return {names.begin(), names.end()};
}

std::vector<BufferUse> buffers(const Expr& root) {
  std::map<std::string, BufferUse> uses;
  for (const Node* n : topo_order(root))
    if (n->op == Op::Load) uses.emplace(n->name, BufferUse{n->name, n->buffer_dtype, int(n->args.size())});
  std::vector<BufferUse> out;
  for (auto& [name, use] : uses) out.push_back(use);
  return out;
}

std::string structural_key(const Expr& root) {
  std::string key;
  std::unordered_map<const Node*, int> index;
  int literal_slot = 0;
  for (const Node* n : topo_order(root)) {
    const int id = int(index.size());
    index[n] = id;
    key += std::to_string(id) + "=";
    key += op_name(n->op);
    key += ":";
    key += dtype_name(n->type);
    if (n->weak) key += "w";
    if (n->op == Op::Literal) key += "#" + std::to_string(literal_slot++);
    if (n->op == Op::Scalar || n->op == Op::Load) key += ":" + n->name;
    if (n->op == Op::Load) key += ":" + std::string(dtype_name(n->buffer_dtype));
    key += "(";
    for (size_t i = 0; i < n->args.size(); ++i) key += (i ? "," : "") + std::to_string(index.at(n->args[i].get()));
    key += ");";
  }
  return key;
}

uint64_t structural_hash(const Expr& root) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : structural_key(root)) h = (h ^ c) * 1099511628211ull;
  return h;
}

bool depends_on(const Expr& root, Op leaf) {
  for (const Node* n : topo_order(root))
    if (n->op == leaf) return true;
  return false;
}

}  // namespace flexattn::ir
