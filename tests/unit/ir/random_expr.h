#pragma once
// Seeded random expressions over every op of ir_nodes.def, for property tests of IR passes.
//
//   flexattn::ir::testing::TestWorld world;            // fixed captured buffers and named scalars
//   flexattn::ir::testing::RandomExprGen gen(world, 42);
//   Expr e = gen.score_mod();                          // an F32 expression using score, loads, scalars
//   for (const auto& p : flexattn::ir::testing::edge_points())
//     Value v = eval(e, world.env(p));
//
// Expressions are built through the public factories (so they carry the lead's promotion rules);
// a combination the factories reject (flexattn::Error) is replaced by a leaf, so the generator works
// whatever the exact typing rules are. The same seed gives the same expressions.
#include <pthread.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "flexattn/error.h"
#include "flexattn/expr.h"

namespace flexattn::ir::testing {

// A captured buffer with owned storage.
struct TestBuffer {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
  BufferView view;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }
  double get(int64_t i) const { return load_as_double(bytes.data(), dtype, i); }
  void set(int64_t i, double v) { store_from_double(bytes.data(), dtype, i, v); }
};

// Inputs of one evaluation.
struct Point {
  double score = 0.0;
  int64_t b = 0, h = 0, q = 0, kv = 0;
};

// The buffers and scalars random expressions draw from. Contents are fixed (seeded), so a failing
// case reproduces. Non-copyable: environments it hands out point into it.
class TestWorld {
 public:
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  static constexpr double kInf = std::numeric_limits<double>::infinity();

  TestWorld() {
    std::mt19937_64 rng(1234);
    std::uniform_real_distribution<double> u(-2.0, 2.0);
    // Ranks 1..4, every buffer dtype the IR allows; lengths around the block boundary 128.
    add("bias", DType::F32, {4, 200}, [&](int64_t i) { return i % 37 == 0 ? (i % 2 ? -0.0 : 0.0) : u(rng); });
    add("edge", DType::F32, {8}, [&](int64_t i) {
      const double v[8] = {0.0, -0.0, kInf, -kInf, kNaN, 1.0, -1.0, 1e30};
      return v[i];
    });
    add("slope", DType::BF16, {16}, [&](int64_t) { return u(rng); });
    add("tab", DType::F16, {3, 5, 7}, [&](int64_t) { return u(rng); });
    add("doc", DType::I32, {300}, [&](int64_t i) { return double(i / 50 - 1); });
    add("pos", DType::I64, {2, 130}, [&](int64_t i) { return double(int64_t(i * 7919 % 311) - 100); });
    add("blk", DType::Bool, {2, 3, 4, 5}, [&](int64_t i) { return double((i * 5 + 3) % 3 == 0); });
    scalars_ = {{"alpha", 0.75}, {"gamma", -0.0}, {"offset", -3}, {"window", 128}, {"causal", 1}};
    scalar_types_ = {{"alpha", DType::F32}, {"gamma", DType::F32}, {"offset", DType::I32},
                     {"window", DType::I64}, {"causal", DType::Bool}};
  }
  TestWorld(const TestWorld&) = delete;
  TestWorld& operator=(const TestWorld&) = delete;

  std::vector<TestBuffer>& buffers() { return buffers_; }
  const std::vector<TestBuffer>& buffers() const { return buffers_; }
  TestBuffer* find(const std::string& name) {
    for (auto& b : buffers_)
      if (b.name == name) return &b;
    return nullptr;
  }
  const std::map<std::string, DType>& scalar_types() const { return scalar_types_; }
  void set_scalar(const std::string& name, double v) { scalars_[name] = v; }

  EvalEnv env(const Point& p) const {
    EvalEnv e;
    e.score = p.score;
    e.b = p.b;
    e.h = p.h;
    e.q_idx = p.q;
    e.kv_idx = p.kv;
    e.scalar = [this](const std::string& n) {
      auto it = scalars_.find(n);
      return it == scalars_.end() ? 0.0 : it->second;
    };
    e.buffer = [this](const std::string& n) -> const BufferView* {
      for (const auto& b : buffers_)
        if (b.name == n) return &b.view;
      return nullptr;
    };
    return e;
  }

 private:
  template <typename F>
  void add(const std::string& name, DType dt, std::vector<int64_t> shape, F fill) {
    TestBuffer b;
    b.name = name;
    b.dtype = dt;
    b.shape = std::move(shape);
    b.bytes.assign(size_t(b.numel() * dtype_size(dt)), 0);
    for (int64_t i = 0; i < b.numel(); ++i) b.set(i, fill(i));
    buffers_.push_back(std::move(b));
    // Views point into the vector's elements: refresh all of them after any growth.
    for (auto& x : buffers_) x.view = BufferView{x.dtype, x.shape, x.bytes.data()};
  }

  std::vector<TestBuffer> buffers_;
  std::map<std::string, double> scalars_;
  std::map<std::string, DType> scalar_types_;
};

// Edge environments: scores {±0, ±inf, NaN, ±1, 0.5, 1e30, random} × index sets around the block
// boundary 128, large and mismatched (kv > q, so q - kv is negative) indices.
inline std::vector<Point> edge_points(uint64_t seed = 7) {
  const double inf = std::numeric_limits<double>::infinity();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-8.0, 8.0);
  const double scores[] = {0.0, -0.0, inf, -inf, std::numeric_limits<double>::quiet_NaN(),
                           1.0, -1.0, 0.5, 1e30, u(rng), u(rng)};
  const int64_t idx[][4] = {{0, 0, 0, 0},     {1, 1, 1, 1},         {0, 3, 127, 128},
                            {1, 2, 128, 129}, {0, 0, 129, 127},     {1, 7, 5, 300},
                            {0, 15, 1000000, 3}, {1, 1, 2147483647, 0}};
  std::vector<Point> pts;
  for (double s : scores)
    for (const auto& i : idx) pts.push_back(Point{s, i[0], i[1], i[2], i[3]});
  return pts;
}

// Bitwise equality of interpreter values; every NaN equals every NaN, +0 and -0 differ.
inline bool same_value(const Value& a, const Value& b) {
  if (a.type != b.type) return false;
  if (a.type != DType::F32) return a.i == b.i;
  if (std::isnan(a.f) && std::isnan(b.f)) return true;
  return std::memcmp(&a.f, &b.f, sizeof(double)) == 0;
}

inline std::string value_text(const Value& v) {
  return std::string(dtype_name(v.type)) + ":" + (v.type == DType::F32 ? std::to_string(v.f) : std::to_string(v.i));
}

// Runs fn on a thread with a small stack (default 128 KiB) and waits for it, so a pass that
// recursed once per level of a long chain crashes the test instead of passing on a big main stack.
// Keep the expressions alive outside fn: destroying a long chain recurses once per level.
template <typename F>
bool on_small_stack(F fn, size_t stack_kib = 128) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, stack_kib * 1024);
  pthread_t th;
  auto body = [](void* p) -> void* {
    (*static_cast<F*>(p))();
    return nullptr;
  };
  const bool ok = pthread_create(&th, &attr, body, &fn) == 0 && pthread_join(th, nullptr) == 0;
  pthread_attr_destroy(&attr);
  return ok;
}

struct GenOptions {
  int max_depth = 4;
  // Only float ops that are piecewise smooth with a finite domain around most points (for
  // finite-difference tests): divisors kept away from 0, log/sqrt arguments positive, no casts from
  // int, no int-valued loads, no inf/NaN or huge literals. Jumps (floor, mod, where) remain; tests
  // skip points where two step sizes disagree.
  bool smooth = false;
  bool use_loads = true;
  bool use_scalars = true;
  // Probability of deliberately building an identity/absorbing pattern (x+0, x*1, where(c,a,a),
  // x-x, min(x,x), !!b, cast to same type, ...), so simplifier rules fire often.
  double pattern_rate = 0.2;
};

class RandomExprGen {
 public:
  RandomExprGen(const TestWorld& world, uint64_t seed, GenOptions opt = {})
      : world_(world), rng_(seed), opt_(opt) {}

  std::mt19937_64& rng() { return rng_; }
  const GenOptions& options() const { return opt_; }

  Expr score_mod() { return f32(opt_.max_depth); }
  Expr mask_mod() { return boolean(opt_.max_depth, /*allow_score=*/false); }
  // An expression of a random category (float, int or bool).
  Expr any(int depth) {
    switch (pick(3)) {
      case 0: return f32(depth);
      case 1: return integer(depth);
      default: return boolean(depth);
    }
  }

  Expr f32(int depth, bool allow_score = true) {
    Expr e = attempt([&] { return f32_raw(depth, allow_score); }, [&] { return f32_leaf(allow_score); });
    return as_category(e, DType::F32);
  }
  Expr integer(int depth, bool allow_score = true) {
    Expr e = attempt([&] { return int_raw(depth, allow_score); }, [&] { return int_leaf(); });
    return as_category(e, DType::I32);
  }
  Expr boolean(int depth, bool allow_score = true) {
    Expr e = attempt([&] { return bool_raw(depth, allow_score); }, [&] { return bool_leaf(); });
    return as_category(e, DType::Bool);
  }

 private:
  int pick(int n) { return int(rng_() % uint64_t(n)); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <typename T>
  const T& one_of(const std::vector<T>& v) { return v[size_t(pick(int(v.size())))]; }

  template <typename F, typename G>
  Expr attempt(F build, G fallback) {
    try {
      Expr e = build();
      remember(e);
      return e;
    } catch (const flexattn::Error&) {
      return fallback();
    }
  }
  void remember(const Expr& e) {
    if (pool_.size() < 64) pool_.push_back(e);
    else pool_[size_t(pick(64))] = e;
  }
  // A previously built expression of the category, to make DAGs with shared nodes.
  Expr reuse(DType cat) {
    std::vector<Expr> c;
    for (const auto& e : pool_)
      if (category(e.type()) == cat) c.push_back(e);
    return c.empty() ? Expr() : one_of(c);
  }
  static DType category(DType t) { return is_int(t) ? DType::I32 : t; }
  Expr as_category(Expr e, DType cat) {
    if (category(e.type()) == cat) return e;
    DType to = cat == DType::I32 ? (chance(0.5) ? DType::I32 : DType::I64) : cat;
    return cast(e, to);
  }

  // ---- leaves ----
  Expr float_literal() {
    static const std::vector<double> v = {0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 30.0, 1e30, -1e-3, 3.0,
                                          TestWorld::kInf, -TestWorld::kInf, TestWorld::kNaN};
    double x = chance(0.25) ? std::uniform_real_distribution<double>(-4, 4)(rng_) : one_of(v);
    if (opt_.smooth && !(std::fabs(x) < 1e3)) x = 0.5;
    return chance(0.6) ? Expr(x) : literal(x, DType::F32, false);
  }
  Expr int_literal() {
    static const std::vector<int64_t> v = {0, 1, -1, 2, 3, 7, 127, 128, -128, 2147483647, -2147483647 - 1};
    int64_t x = one_of(v);
    switch (pick(3)) {
      case 0: return Expr(chance(0.1) ? (int64_t(1) << 40) + x : x);
      case 1: return literal(double(x), DType::I32, false);
      default: return literal(double(chance(0.2) ? (int64_t(1) << 40) + x : x), DType::I64, false);
    }
  }
  Expr scalar_of(DType cat) {
    std::vector<std::string> names;
    for (const auto& [n, t] : world_.scalar_types())
      if (category(t) == cat) names.push_back(n);
    if (names.empty()) return Expr();
    const std::string& n = one_of(names);
    return scalar(n, world_.scalar_types().at(n));
  }
  Expr load_of(DType cat) {
    std::vector<const TestBuffer*> c;
    for (const auto& b : world_.buffers()) {
      DType t = is_float(b.dtype) ? DType::F32 : category(b.dtype);
      if (t != cat) continue;
      if (opt_.smooth && b.name == "edge") continue;
      c.push_back(&b);
    }
    if (c.empty()) return Expr();
    const TestBuffer* b = one_of(c);
    std::vector<Expr> idx;
    for (size_t d = 0; d < b->shape.size(); ++d) idx.push_back(index_expr());
    return load(b->name, b->dtype, idx);
  }
  // Indices that land on both sides of 0 and of the buffer ends.
  Expr index_expr() {
    switch (pick(7)) {
      case 0: return head();
      case 1: return q_idx();
      case 2: return kv_idx();
      case 3: return q_idx() - kv_idx();
      case 4: return Expr(pick(3) - 1);
      case 5: return batch();
      default: return opt_.smooth ? kv_idx() : integer(1, false);
    }
  }
  Expr f32_leaf(bool allow_score) {
    for (;;) {
      switch (pick(6)) {
        case 0:
        case 1:
          if (allow_score) return score();
          break;
        case 2: return float_literal();
        case 3:
          if (opt_.use_scalars) return scalar("alpha");
          break;
        case 4:
          if (opt_.use_loads) return load_of(DType::F32);
          break;
        default:
          if (!opt_.smooth) return cast(int_leaf(), DType::F32);
          return float_literal();
      }
    }
  }
  Expr int_leaf() {
    for (;;) {
      switch (pick(7)) {
        case 0: return batch();
        case 1: return head();
        case 2: return q_idx();
        case 3: return kv_idx();
        case 4: return int_literal();
        case 5:
          if (opt_.use_scalars) return scalar_of(DType::I32);
          break;
        default:
          if (opt_.use_loads) return load_of(DType::I32);
          break;
      }
    }
  }
  Expr bool_leaf() {
    for (;;) {
      switch (pick(4)) {
        case 0: return Expr(chance(0.5));
        case 1:
          if (opt_.use_scalars) return scalar("causal", DType::Bool);
          break;
        case 2:
          if (opt_.use_loads) return load_of(DType::Bool);
          break;
        default: return q_idx() >= kv_idx();
      }
    }
  }

  // ---- composites ----
  Expr f32_raw(int depth, bool allow_score) {
    if (depth <= 0) return f32_leaf(allow_score);
    if (Expr e = reuse(DType::F32); e.get() && chance(0.1) && (allow_score || !depends_on(e, Op::Score))) return e;
    auto sub = [&] { return f32(depth - 1, allow_score); };
    auto other = [&]() -> Expr {  // the second operand may be of any numeric category (promotion)
      if (opt_.smooth || chance(0.7)) return sub();
      return chance(0.5) ? integer(depth - 1, allow_score) : float_literal();
    };
    if (chance(opt_.pattern_rate)) return pattern(sub(), DType::F32, depth, allow_score);
    static const std::vector<Op> all = {Op::Neg,  Op::Abs,      Op::Exp,  Op::Exp2,    Op::Log,  Op::Log2,
                                        Op::Sqrt, Op::Rsqrt,    Op::Tanh, Op::TanhApprox, Op::Sigmoid, Op::Sin,  Op::Cos, Op::Tan, Op::Erf,
                                        Op::Floor, Op::Ceil,    Op::Detach, Op::Add,  Op::Sub,  Op::Mul,  Op::Div,
                                        Op::FloorDiv, Op::Mod,  Op::Min,  Op::Max,     Op::Pow,  Op::Select,
                                        Op::Cast};
    static const std::vector<Op> smooth = {Op::Neg, Op::Exp,  Op::Tanh, Op::TanhApprox, Op::Erf, Op::Sigmoid, Op::Sin, Op::Cos,
                                           Op::Add, Op::Sub,  Op::Mul,  Op::Div,     Op::Log, Op::Sqrt,
                                           Op::Rsqrt, Op::Exp2, Op::Log2, Op::Pow,   Op::Abs, Op::Min,
                                           Op::Max, Op::Select, Op::Mod, Op::FloorDiv, Op::Floor, Op::Ceil};
    Op op = one_of(opt_.smooth ? smooth : all);
    switch (op) {
      case Op::Log:
      case Op::Log2:
      case Op::Sqrt:
      case Op::Rsqrt:
        // Keep smooth-mode arguments positive so finite differences have a domain.
        if (opt_.smooth) return unary(op, Expr(0.25) + exp(sub()));
        return unary(op, sub());
      case Op::Pow:
        if (opt_.smooth) return pow(Expr(0.5) + sigmoid(sub()), chance(0.5) ? sub() : Expr(double(pick(4))));
        return pow(sub(), other());
      case Op::Select: return where(boolean(depth - 1, allow_score), sub(), other());
      case Op::Cast: return cast(chance(0.5) ? sub() : integer(depth - 1, allow_score), DType::F32);
      case Op::Div:
      case Op::Mod:
      case Op::FloorDiv:
        if (opt_.smooth) return binary(op, sub(), Expr(1.5) + sin(sub()));
        return binary(op, sub(), other());
      default:
        if (op_arity(op) == 1) return unary(op, sub());
        return chance(0.5) ? binary(op, sub(), other()) : binary(op, other(), sub());
    }
  }

  Expr int_raw(int depth, bool allow_score) {
    if (depth <= 0) return int_leaf();
    if (Expr e = reuse(DType::I32); e.get() && chance(0.1) && (allow_score || !depends_on(e, Op::Score))) return e;
    auto sub = [&] { return integer(depth - 1, allow_score); };
    if (chance(opt_.pattern_rate)) return pattern(sub(), DType::I32, depth, allow_score);
    static const std::vector<Op> ops = {Op::Neg, Op::Abs, Op::Add, Op::Sub, Op::Mul, Op::FloorDiv, Op::Mod,
                                        Op::Min, Op::Max, Op::Pow, Op::Select, Op::Cast, Op::Load, Op::Floor,
                                        Op::Ceil, Op::BitAnd, Op::BitOr, Op::Shl, Op::Shr};
    Op op = one_of(ops);
    switch (op) {
      case Op::Select: return where(boolean(depth - 1, allow_score), sub(), sub());
      case Op::Cast: {
        static const std::vector<DType> to = {DType::I32, DType::I64};
        Expr src = pick(3) == 0 ? f32(depth - 1, allow_score) : chance(0.5) ? sub() : boolean(depth - 1, allow_score);
        return cast(src, one_of(to));
      }
      case Op::Load:
        if (!opt_.use_loads) return sub();
        return load_of(DType::I32);
      case Op::Pow: return pow(sub(), Expr(pick(4)));
      case Op::Shl:
      case Op::Shr:  // counts in and around [0, 64), the edges included
        return binary(op, sub(), chance(0.5) ? Expr(pick(70) - 3) : sub());
      default:
        if (op_arity(op) == 1) return unary(op, sub());
        return binary(op, sub(), sub());
    }
  }

  Expr bool_raw(int depth, bool allow_score) {
    if (depth <= 0) return bool_leaf();
    if (Expr e = reuse(DType::Bool); e.get() && chance(0.1) && (allow_score || !depends_on(e, Op::Score))) return e;
    auto sub = [&] { return boolean(depth - 1, allow_score); };
    auto number = [&]() -> Expr {
      return opt_.smooth || chance(0.5) ? f32(depth - 1, allow_score) : integer(depth - 1, allow_score);
    };
    if (chance(opt_.pattern_rate)) return pattern(sub(), DType::Bool, depth, allow_score);
    static const std::vector<Op> ops = {Op::Not, Op::And, Op::Or, Op::Eq, Op::Ne, Op::Lt, Op::Le,
                                        Op::Gt,  Op::Ge,  Op::Select, Op::Cast};
    Op op = one_of(ops);
    switch (op) {
      case Op::Not: return unary(Op::Not, sub());
      case Op::And:
      case Op::Or: return binary(op, sub(), sub());
      case Op::Select: return where(sub(), sub(), sub());
      case Op::Cast: return cast(number(), DType::Bool);
      default: {
        Expr a = number();
        Expr b = chance(0.3) ? a : number();
        return binary(op, a, b);
      }
    }
  }

  // Shapes the simplifier has rules for, built around x (of category cat).
  Expr pattern(Expr x, DType cat, int depth, bool allow_score) {
    if (cat == DType::Bool) {
      switch (pick(8)) {
        case 0: return !(!x);
        case 1: return x && Expr(true);
        case 2: return x || Expr(false);
        case 3: return Expr(false) && x;
        case 4: return where(x, Expr(true), Expr(false));
        case 5: return binary(Op::Eq, x, x);
        case 6: return cast(x, DType::Bool);
        default: return where(!x, x, boolean(depth - 1, allow_score));
      }
    }
    Expr zero = cat == DType::F32 ? (chance(0.5) ? Expr(0.0) : Expr(-0.0)) : Expr(0);
    Expr one = cat == DType::F32 && chance(0.5) ? Expr(1.0) : Expr(1);
    switch (pick(16)) {
      case 0: return x + zero;
      case 1: return zero + x;
      case 2: return x - zero;
      case 3: return zero - x;
      case 4: return x * one;
      case 5: return one * x;
      case 6: return x * zero;
      case 7: return x - x;
      case 8: return -(-x);
      case 9: return opt_.smooth ? x / one : floordiv(x, one);
      case 10: return minimum(x, x);
      case 11: return maximum(x, x);
      case 12: return where(boolean(depth - 1, allow_score), x, x);
      case 13: return where(Expr(chance(0.5)), x, chance(0.5) ? x + one : x * x);
      case 14: return cast(x, x.type());
      default: return x * Expr(-1) + (-x);
    }
  }

  const TestWorld& world_;
  std::mt19937_64 rng_;
  GenOptions opt_;
  std::vector<Expr> pool_;
};

}  // namespace flexattn::ir::testing
