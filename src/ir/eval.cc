// The scalar interpreter: the executable definition of every IR node. Generated kernels must agree
// with it (in f32 rather than double). Float math is done in double; integers wrap like torch's
// int32/int64 tensors.
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "flexattn/error.h"
#include "flexattn/expr.h"

namespace flexattn::ir {

namespace {

int64_t wrap(int64_t v, DType t) {
  if (t == DType::I32) return int64_t(int32_t(uint32_t(uint64_t(v))));
  if (t == DType::Bool) return v != 0;
  return v;
}

// Float -> int conversion as CUDA's cvt.rzi.sat: truncate, saturate, NaN -> 0. torch leaves these
// cases undefined; we pick the one every backend can reproduce.
int64_t float_to_int(double f, DType t) {
  if (std::isnan(f)) return 0;
  const double lo = t == DType::I32 ? -2147483648.0 : -9223372036854775808.0;
  const double hi = t == DType::I32 ? 2147483647.0 : 9223372036854775807.0;
  if (f <= lo) return t == DType::I32 ? INT32_MIN : INT64_MIN;
  if (f >= hi) return t == DType::I32 ? INT32_MAX : INT64_MAX;
  return int64_t(std::trunc(f));
}

Value convert(const Value& v, DType to) {
  Value r;
  r.type = to;
  if (to == DType::F32) {
    r.f = v.as_double();
  } else if (to == DType::Bool) {
    r.i = v.as_bool() ? 1 : 0;
  } else if (v.type == DType::F32) {
    r.i = float_to_int(v.f, to);
  } else {
    r.i = wrap(v.i, to);
  }
  return r;
}

Value make_f(double f) { Value v; v.type = DType::F32; v.f = f; return v; }
Value make_i(int64_t i, DType t) { Value v; v.type = t; v.i = wrap(i, t); return v; }
Value make_b(bool b) { Value v; v.type = DType::Bool; v.i = b; return v; }

// Arithmetic in uint64 so overflow wraps instead of being undefined behaviour.
int64_t add_w(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }
int64_t sub_w(int64_t a, int64_t b) { return int64_t(uint64_t(a) - uint64_t(b)); }
int64_t mul_w(int64_t a, int64_t b) { return int64_t(uint64_t(a) * uint64_t(b)); }

int64_t floordiv_i(int64_t a, int64_t b, DType t) {
  if (b == 0) return 0;  // torch raises on CPU and is undefined on GPU; we define 0
  if (b == -1) return wrap(sub_w(0, a), t);
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t mod_i(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
// torch's div_floor_floating.
double floordiv_f(double a, double b) {
  if (b == 0.0) return a / b;
  const double m = std::fmod(a, b);
  double div = (a - m) / b;
  if (m != 0.0 && ((b < 0) != (m < 0))) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, a / b);
  double fl = std::floor(div);
  if (div - fl > 0.5) fl += 1.0;
  return fl;
}
// torch's remainder for floating point: the sign of the divisor.
double mod_f(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0.0 && ((b < 0) != (m < 0))) m += b;
  return m;
}
int64_t pow_i(int64_t base, int64_t e, DType t) {
  if (e < 0) return base == 1 ? 1 : (base == -1 ? ((e & 1) ? -1 : 1) : 0);
  int64_t r = 1;
  while (e > 0) {
    if (e & 1) r = wrap(mul_w(r, base), t);
    base = wrap(mul_w(base, base), t);
    e >>= 1;
  }
  return r;
}
// torch.minimum / maximum propagate NaN.
double min_f(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return a < b ? a : b;
}
double max_f(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return a > b ? a : b;
}

DType compare_type(const Node& a, const Node& b) { return promote(a, b); }

Value eval_node(const Node& n, const Value* const* a, const EvalEnv* env, const Value* bound,
                const BufferView* buf) {
  switch (n.op) {
    case Op::Score: return make_f(env->score);
    case Op::Batch: return make_i(env->b, DType::I32);
    case Op::Head: return make_i(env->h, DType::I32);
    case Op::QIdx: return make_i(env->q_idx, DType::I32);
    case Op::KvIdx: return make_i(env->kv_idx, DType::I32);
    case Op::Literal:
      if (n.type == DType::F32) return make_f(n.value);
      return make_i(int64_t(n.value), n.type);
    case Op::Scalar: return *bound;
    case Op::Load: {
      int64_t flat = 0;
      for (size_t d = 0; d < n.args.size(); ++d) {
        const int64_t size = buf->shape[d];
        flat = flat * size + clamp_index(a[d]->i, size);
      }
      const double v = load_as_double(buf->data, buf->dtype, flat);
      if (n.type == DType::F32) return make_f(v);
      if (n.type == DType::I64) {
        int64_t iv;
        std::memcpy(&iv, static_cast<const uint8_t*>(buf->data) + 8 * flat, 8);
        return make_i(iv, DType::I64);
      }
      return make_i(int64_t(v), n.type);
    }
    case Op::Neg:
      if (n.type == DType::F32) return make_f(-a[0]->as_double());
      return make_i(sub_w(0, convert(*a[0], n.type).i), n.type);
    case Op::Abs:
      if (n.type == DType::F32) return make_f(std::fabs(a[0]->as_double()));
      { int64_t x = convert(*a[0], n.type).i; return make_i(x < 0 ? sub_w(0, x) : x, n.type); }
    case Op::Exp: return make_f(std::exp(a[0]->as_double()));
    case Op::Exp2: return make_f(std::exp2(a[0]->as_double()));
    case Op::Log: return make_f(std::log(a[0]->as_double()));
    case Op::Log2: return make_f(std::log2(a[0]->as_double()));
    case Op::Sqrt: return make_f(std::sqrt(a[0]->as_double()));
    case Op::Rsqrt: return make_f(1.0 / std::sqrt(a[0]->as_double()));
    case Op::Tanh:
    case Op::TanhApprox: return make_f(std::tanh(a[0]->as_double()));  // the definition: tanh
    case Op::Sigmoid: return make_f(1.0 / (1.0 + std::exp(-a[0]->as_double())));
    case Op::Sin: return make_f(std::sin(a[0]->as_double()));
    case Op::Cos: return make_f(std::cos(a[0]->as_double()));
    case Op::Tan: return make_f(std::tan(a[0]->as_double()));
    case Op::Erf: return make_f(std::erf(a[0]->as_double()));
    case Op::Detach: return *a[0];
    case Op::Floor:
      if (n.type == DType::F32) return make_f(std::floor(a[0]->as_double()));
      return convert(*a[0], n.type);
    case Op::Ceil:
      if (n.type == DType::F32) return make_f(std::ceil(a[0]->as_double()));
      return convert(*a[0], n.type);
    case Op::Not: return make_b(!a[0]->as_bool());
    case Op::Cast: return convert(*a[0], n.type);
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::FloorDiv: case Op::Mod:
    case Op::Min: case Op::Max: case Op::Pow: {
      // Operands are converted to the node's type first (Div: to f32), exactly torch's promotion.
      if (n.type == DType::F32) {
        const double x = a[0]->as_double(), y = a[1]->as_double();
        switch (n.op) {
          case Op::Add: return make_f(x + y);
          case Op::Sub: return make_f(x - y);
          case Op::Mul: return make_f(x * y);
          case Op::Div: return make_f(x / y);
          case Op::FloorDiv: return make_f(floordiv_f(x, y));
          case Op::Mod: return make_f(mod_f(x, y));
          case Op::Min: return make_f(min_f(x, y));
          case Op::Max: return make_f(max_f(x, y));
          case Op::Pow: return make_f(std::pow(x, y));
          default: break;
        }
      }
      const int64_t x = convert(*a[0], n.type).i, y = convert(*a[1], n.type).i;
      switch (n.op) {
        case Op::Add: return make_i(add_w(x, y), n.type);
        case Op::Sub: return make_i(sub_w(x, y), n.type);
        case Op::Mul: return make_i(mul_w(x, y), n.type);
        case Op::FloorDiv: return make_i(floordiv_i(x, y, n.type), n.type);
        case Op::Mod: return make_i(mod_i(x, y), n.type);
        case Op::Min: return make_i(x < y ? x : y, n.type);
        case Op::Max: return make_i(x > y ? x : y, n.type);
        case Op::Pow: return make_i(pow_i(x, y, n.type), n.type);
        default: break;
      }
      throw Error("internal: bad arithmetic node");
    }
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: {
      const DType t = compare_type(*n.args[0], *n.args[1]);
      int c;  // -2 = unordered (NaN)
      if (t == DType::F32) {
        const double x = a[0]->as_double(), y = a[1]->as_double();
        c = (std::isnan(x) || std::isnan(y)) ? -2 : (x < y ? -1 : (x > y ? 1 : 0));
      } else {
        const int64_t x = convert(*a[0], t).i, y = convert(*a[1], t).i;
        c = x < y ? -1 : (x > y ? 1 : 0);
      }
      switch (n.op) {
        case Op::Eq: return make_b(c == 0);
        case Op::Ne: return make_b(c != 0);
        case Op::Lt: return make_b(c == -1);
        case Op::Le: return make_b(c == -1 || c == 0);
        case Op::Gt: return make_b(c == 1);
        case Op::Ge: return make_b(c == 1 || c == 0);
        default: break;
      }
      throw Error("internal: bad comparison node");
    }
    case Op::BitAnd: case Op::BitOr: case Op::Shl: case Op::Shr: {
      const int64_t x = convert(*a[0], n.type).i, y = convert(*a[1], n.type).i;
      const int64_t bits = n.type == DType::I32 ? 32 : 64;
      switch (n.op) {
        case Op::BitAnd: return make_i(x & y, n.type);
        case Op::BitOr: return make_i(x | y, n.type);
        case Op::Shl: return make_i(y < 0 || y >= bits ? 0 : int64_t(uint64_t(x) << y), n.type);
        case Op::Shr: return make_i(x >> (y < 0 || y >= bits ? bits - 1 : y), n.type);  // arithmetic
        default: break;
      }
      throw Error("internal: bad bitwise node");
    }
    case Op::And: return make_b(a[0]->as_bool() && a[1]->as_bool());
    case Op::Or: return make_b(a[0]->as_bool() || a[1]->as_bool());
    case Op::Select: return convert(a[0]->as_bool() ? *a[1] : *a[2], n.type);
  }
  throw Error("internal: unknown IR node");
}

}  // namespace

Evaluator::Evaluator(const Expr& e) : order_(topo_order(e)) {
  if (e.empty()) throw Error("eval: the expression is empty");
  std::unordered_map<const Node*, int> index;
  for (size_t i = 0; i < order_.size(); ++i) index[order_[i]] = int(i);
  args_.resize(order_.size());
  for (size_t i = 0; i < order_.size(); ++i) {
    if (order_[i]->args.size() > 4)
      throw Error(std::string("'") + op_name(order_[i]->op) + "' has " + std::to_string(order_[i]->args.size()) +
                  " operands; at most 4 are supported");
    for (const NodePtr& a : order_[i]->args) args_[i].push_back(index.at(a.get()));
  }
  values_.resize(order_.size());
  bound_.resize(order_.size());
  bound_buffers_.assign(order_.size(), nullptr);
}

int Evaluator::index_of(const Node* n) const {
  for (size_t i = 0; i < order_.size(); ++i)
    if (order_[i] == n) return int(i);
  return -1;
}

void Evaluator::bind(const EvalEnv& env) {
  for (size_t i = 0; i < order_.size(); ++i) {
    const Node& n = *order_[i];
    if (n.op == Op::Scalar) {
      if (!env.scalar) throw Error("scalar '" + n.name + "' has no value (no scalars were given)");
      Value v;
      v.type = DType::F32;
      v.f = env.scalar(n.name);
      bound_[i] = convert(v, n.type);
    } else if (n.op == Op::Load) {
      const BufferView* b = env.buffer ? env.buffer(n.name) : nullptr;
      if (!b || !b->data) throw Error("buffer '" + n.name + "' is used by the mod but was not given");
      if (b->shape.size() != n.args.size())
        throw Error("buffer '" + n.name + "' has " + std::to_string(b->shape.size()) + " dimensions but the mod indexes it with " +
                    std::to_string(n.args.size()));
      for (int64_t s : b->shape)
        if (s < 1) throw Error("buffer '" + n.name + "' has an empty dimension");
      if (b->dtype != n.buffer_dtype && !(is_float(b->dtype) && is_float(n.buffer_dtype)))
        throw Error("buffer '" + n.name + "' holds " + std::string(dtype_name(b->dtype)) + " but the mod expects " +
                    std::string(dtype_name(n.buffer_dtype)));
      bound_buffers_[i] = b;
    }
  }
  bound_ok_ = true;
}

Value Evaluator::run(double score, int64_t b, int64_t h, int64_t q, int64_t kv) {
  if (!bound_ok_) bind(EvalEnv{});
  EvalEnv env;
  env.score = score;
  env.b = b;
  env.h = h;
  env.q_idx = q;
  env.kv_idx = kv;
  const Value* a[4];
  for (size_t i = 0; i < order_.size(); ++i) {
    const auto& ai = args_[i];
    for (size_t j = 0; j < ai.size(); ++j) a[j] = &values_[ai[j]];
    values_[i] = eval_node(*order_[i], a, &env, &bound_[i], bound_buffers_[i]);
  }
  return values_.back();
}

Value eval_all(const Expr& e, const EvalEnv& env, std::vector<Value>* values) {
  Evaluator ev(e);
  ev.bind(env);
  Value r = ev.run(env.score, env.b, env.h, env.q_idx, env.kv_idx);
  if (values) *values = ev.values();
  return r;
}

Value eval(const Expr& e, const EvalEnv& env) { return eval_all(e, env, nullptr); }

}  // namespace flexattn::ir
