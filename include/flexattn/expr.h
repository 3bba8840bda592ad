#pragma once
// The mod IR: an immutable, hash-consed expression DAG over the closed node list in ir_nodes.def.
//
// Invariants:
//  - Nodes are created only through the factory functions below; equal (op, type, weak, literal bits,
//    name, args) give the same node (hash-consing), so pointer equality is structural equality
//    *including* literal values.
//  - Value types are Bool, I32, I64 and F32. Buffers may hold any DType except F64; a Load of a
//    float buffer has type F32, of i32 -> I32, of i64 -> I64, of bool -> Bool.
//  - `weak` marks Python-scalar-like values (literals written without a dtype, and expressions made of
//    weak operands only). Weak operands do not raise the dtype within their category, exactly as torch
//    treats Python scalars combined with 0-d tensors.
//  - Every literal is a runtime parameter: structural_key() (the future kernel cache key) excludes
//    literal values, so softcap(20) and softcap(30) share one compiled kernel.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "flexattn/dtype.h"

namespace flexattn::ir {

enum class Op : uint8_t {
#define FLEXATTN_OP(name, arity, text) name,
#include "flexattn/ir_nodes.def"
#undef FLEXATTN_OP
};
constexpr int kNumOps = 0
#define FLEXATTN_OP(name, arity, text) +1
#include "flexattn/ir_nodes.def"
#undef FLEXATTN_OP
    ;

const char* op_name(Op op);  // text spelling from ir_nodes.def
int op_arity(Op op);         // -1 for Load

struct Node;
using NodePtr = std::shared_ptr<const Node>;

struct Node {
  Op op;
  DType type;     // Bool, I32, I64 or F32
  bool weak;      // python-scalar-like (see header comment)
  double value;   // Literal only
  std::string name;      // Scalar: scalar name; Load: buffer name
  DType buffer_dtype;    // Load only: element type of the buffer
  std::vector<NodePtr> args;
  uint64_t hash;  // includes literal values (used for interning)
  // Releases long operand chains iteratively: a recursive release overflows the stack for chains of
  // tens of thousands of nodes (a few thousand under ASan).
  ~Node();
};

// A value handle with operator overloading, so a C++ user writes a mod as a generic lambda:
//   auto softcap = [](auto s, auto b, auto h, auto q, auto kv) { return 30.0 * tanh(s / 30.0); };
class Expr {
 public:
  Expr() = default;
  explicit Expr(NodePtr n) : node_(std::move(n)) {}
  Expr(double v);   // weak float literal (like a Python float)
  Expr(int v);      // weak int literal (like a Python int)
  Expr(int64_t v);  // weak int literal; beyond 32 bits it widens an i32 operand to i64 (q_idx * 2654435761)
  Expr(bool v);     // bool literal
  // Every other integer type (size_t, unsigned, long long, short, char) is a weak int literal too, so plain numbers
  // of any type work in `q_idx - kv_idx <= window`; an unsigned value beyond the int64 range throws flexattn::Error.
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool> &&
                                                    !std::is_same_v<T, int> && !std::is_same_v<T, int64_t>>>
  Expr(T v) : Expr(integral(v)) {}

  const Node* get() const { return node_.get(); }
  const Node& operator*() const { return *node_; }
  const Node* operator->() const { return node_.get(); }
  const NodePtr& ptr() const { return node_; }
  // NOTE: `!e` builds a Not node (mask_mod style); test emptiness with e.empty().
  bool empty() const { return node_ == nullptr; }
  DType type() const { return node_->type; }
  // Structural equality including literal values (nodes are hash-consed). `a == b` on two Exprs
  // builds an Eq node instead; Expr has no conversion to bool, so such a comparison cannot slip into
  // an `if` or a test assertion by accident.
  bool same(const Expr& o) const { return node_ == o.node_; }

 private:
  template <typename T>
  static Expr integral(T v) {
    if constexpr (std::is_signed_v<T>) return Expr(int64_t(v));
    else return unsigned_literal(uint64_t(v));
  }
  static Expr unsigned_literal(uint64_t v);
  NodePtr node_;
};

// ---- leaves -----------------------------------------------------------------------------------
Expr score();   // f32
Expr batch();   // i32 "b"
Expr head();    // i32 "h" (query head)
Expr q_idx();   // i32
Expr kv_idx();  // i32
Expr literal(double v, DType type, bool weak);  // type Bool/I32/I64/F32
Expr scalar(const std::string& name, DType type = DType::F32);  // named runtime scalar (F32/I32/I64/Bool)
// Captured-buffer load. dtype: element type of the buffer; indices: 1..4 integer expressions.
Expr load(const std::string& buffer, DType dtype, const std::vector<Expr>& indices);

// A named captured buffer; calling it with indices builds a Load.
struct Buffer {
  std::string name;
  DType dtype = DType::F32;
  template <typename... I>
  Expr operator()(I... idx) const { return load(name, dtype, {Expr(idx)...}); }
  Expr operator[](Expr i) const { return load(name, dtype, {i}); }
};

// ---- operations (all apply torch 0-d-tensor type promotion; errors are flexattn::Error) ----------
Expr unary(Op op, Expr a);
Expr binary(Op op, Expr a, Expr b);
Expr select(Expr cond, Expr a, Expr b);  // where(cond, a, b)
Expr cast(Expr a, DType to);
// Builds a node exactly as given (no promotion, no checks beyond arity); for passes that already
// know the types (simplifier, derivative, parser of canonical text). `type`/`weak` as for Node.
Expr make_node(Op op, DType type, bool weak, std::vector<Expr> args, double value = 0.0,
               const std::string& name = "", DType buffer_dtype = DType::F32);

Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);   // true division (ints -> f32)
Expr operator%(Expr a, Expr b);   // Python modulo (sign of divisor)
Expr operator-(Expr a);
Expr operator!(Expr a);
Expr operator&&(Expr a, Expr b);
Expr operator||(Expr a, Expr b);
// As torch's: logical on two bools (torch mask_mod style), bitwise on integers (bitwise_* below).
Expr operator&(Expr a, Expr b);
Expr operator|(Expr a, Expr b);
Expr operator^(Expr a, Expr b);   // bools: a != b
Expr operator~(Expr a);
Expr operator==(Expr a, Expr b);
Expr operator!=(Expr a, Expr b);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
// Comparisons with plain numbers, so `q >= kv - 5` and `score < 0.0` work without ambiguity.
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
Expr operator==(Expr a, T b) { return a == Expr(b); }
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
Expr operator!=(Expr a, T b) { return a != Expr(b); }

// Integer bitwise operations (i32 / i64 after promotion; floats and two bools are type errors). Shifts follow
// ATen: a count outside [0, bits) gives 0 (left) or the sign (right, arithmetic). xor and not are built from
// the others: (a | b) - (a & b), -a - 1.
Expr bitwise_and(Expr a, Expr b);
Expr bitwise_or(Expr a, Expr b);
Expr bitwise_xor(Expr a, Expr b);
Expr bitwise_not(Expr a);
Expr bitwise_left_shift(Expr a, Expr b);
Expr bitwise_right_shift(Expr a, Expr b);
Expr floordiv(Expr a, Expr b);    // Python //
Expr mod(Expr a, Expr b);         // Python %
Expr neg(Expr a);
Expr abs(Expr a);
Expr exp(Expr a);
Expr exp2(Expr a);
Expr log(Expr a);
Expr log2(Expr a);
Expr sqrt(Expr a);
Expr rsqrt(Expr a);
Expr tanh(Expr a);
// tanh on the GPU's tanh.approx.f32 (relative error <= 2^-10.99, ~5e-4; the CPU reference computes tanh): a
// softcap of 30 then moves scores by up to ~0.015. Two MUFU ops per entry fewer on the sm90 softcap path.
Expr tanh_approx(Expr a);
Expr sigmoid(Expr a);
Expr sin(Expr a);
Expr cos(Expr a);
Expr tan(Expr a);
Expr erf(Expr a);
Expr floor(Expr a);
Expr detach(Expr a);  // the value of a, through which no gradient flows
Expr ceil(Expr a);
Expr minimum(Expr a, Expr b);
Expr maximum(Expr a, Expr b);
Expr pow(Expr a, Expr b);
Expr where(Expr c, Expr a, Expr b);

// Result type of combining a and b under torch promotion (categories bool < int < float; weak
// operands only pick the category, defaulting to I64 / F32). Throws for invalid combinations.
DType promote(const Node& a, const Node& b, bool* weak_out = nullptr);

// ---- structure ----------------------------------------------------------------------------------
// Nodes reachable from root in post-order (every node once, operands before users).
std::vector<const Node*> topo_order(const Expr& root);
// Distinct Literal nodes in first-visit post-order: literal slot k of the generated kernel.
std::vector<const Node*> literal_slots(const Expr& root);
// Distinct scalar names, sorted.
std::vector<std::string> scalar_names(const Expr& root);
struct BufferUse {
  std::string name;
  DType dtype;
  int rank;
};
// Distinct buffers loaded, sorted by name.
std::vector<BufferUse> buffers(const Expr& root);
// Canonical serialization of the DAG with literal values replaced by their slot numbers; equal keys
// <=> same kernel source. structural_hash is a 64-bit FNV-1a of it.
std::string structural_key(const Expr& root);
uint64_t structural_hash(const Expr& root);
bool depends_on(const Expr& root, Op leaf);  // e.g. depends_on(e, Op::Score)

// ---- interpreter (the executable definition of every node) ---------------------------------------
struct Value {
  DType type = DType::F32;  // Bool, I32, I64 or F32 (F32 values are held in double precision)
  double f = 0.0;           // F32
  int64_t i = 0;            // Bool (0/1), I32 (wrapped to 32 bits), I64
  double as_double() const { return type == DType::F32 ? f : double(i); }
  bool as_bool() const { return type == DType::F32 ? f != 0.0 : i != 0; }
};

// Host view of a captured buffer: contiguous, row-major.
struct BufferView {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

struct EvalEnv {
  double score = 0.0;
  int64_t b = 0, h = 0, q_idx = 0, kv_idx = 0;
  std::function<double(const std::string&)> scalar;            // named scalar values
  std::function<const BufferView*(const std::string&)> buffer;  // captured buffers
};

// Evaluates in double precision. Integer ops wrap like torch int32/int64; x // 0 and x % 0 are 0 for
// integers; buffer indices wrap once if negative (Python style) and are then clamped into range
// (documented in docs/architecture.md: an out-of-range gather is undefined in torch, never an
// out-of-bounds read here).
Value eval(const Expr& e, const EvalEnv& env);
// Evaluates every node once (memoized over the DAG); `values` receives one Value per topo_order node.
Value eval_all(const Expr& e, const EvalEnv& env, std::vector<Value>* values);

// A compiled interpreter for one expression: precomputes the DAG order once and reuses its value
// storage, so evaluating a mod at every (b, h, q, kv) allocates nothing. Not thread-safe: one per
// thread.
class Evaluator {
 public:
  explicit Evaluator(const Expr& e);
  // Resolves named scalars and buffers once (throws flexattn::Error for a missing one).
  void bind(const EvalEnv& env);
  Value run(double score, int64_t b, int64_t h, int64_t q, int64_t kv);
  // Values of every node of the last run, in topo_order(e).
  const std::vector<Value>& values() const { return values_; }
  const std::vector<const Node*>& order() const { return order_; }
  int index_of(const Node* n) const;  // position in order(), -1 if absent

 private:
  std::vector<const Node*> order_;
  std::vector<std::vector<int>> args_;
  std::vector<Value> values_;
  std::vector<Value> bound_;                    // scalar values per node (Scalar nodes)
  std::vector<const BufferView*> bound_buffers_;  // per node (Load nodes)
  bool bound_ok_ = false;
};

// Buffer index normalisation shared by the interpreter and every generated kernel.
inline int64_t clamp_index(int64_t i, int64_t size) {
  if (i < 0) i += size;
  if (i < 0) i = 0;
  if (i >= size) i = size - 1;
  return i;
}

}  // namespace flexattn::ir
