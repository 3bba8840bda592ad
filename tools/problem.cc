#include "problem.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include "args.h"
#include "flexattn/cpu_variant.h"
#include "flexattn/error.h"
#include "flexattn/ir_passes.h"
#include "flexattn/ir_text.h"
#include "flexattn/npy.h"

namespace flexattn::cli {

namespace fs = std::filesystem;

namespace {

// Input tensors are far smaller than this; the cap turns a typo (-Q 10000000000) into an error
// instead of a failed allocation.
constexpr int64_t kMaxElements = int64_t(1) << 31;

uint64_t stream_seed(uint64_t seed, uint64_t stream) { return seed * 0x9E3779B97F4A7C15ull + stream * 0xD1B54A32D192ED03ull; }

HostTensor random_tensor(DType t, std::vector<int64_t> shape, uint64_t seed, uint64_t stream) {
  HostTensor r(t, std::move(shape));
  mods::fill_normal(&r, stream_seed(seed, stream));
  return r;
}


HostTensor load_input(const std::string& dir, const std::string& name, DType dtype) {
  const std::string path = (fs::path(dir) / (name + ".npy")).string();
  HostTensor t = npy::read(path);
  check(t.shape.size() == 4, path + ": expected a 4-d array [B, H, L, D], got shape " + shape_string(t.shape));
  check(is_float(t.dtype), path + ": expected a float array, got " + std::string(dtype_name(t.dtype)));
  for (int64_t d : t.shape) check(d >= 1, path + ": every dimension must be >= 1, got shape " + shape_string(t.shape));
  return cast_tensor(t, dtype);
}

// A flag value that the user may or may not have given, checked against the loaded tensor.
void agree(int64_t given, int64_t actual, const std::string& flag, const std::string& what) {
  check(given < 0 || given == actual,
        flag + " " + std::to_string(given) + " disagrees with " + what + " = " + std::to_string(actual) + " of --load");
}

ir::Expr parse_mod(const std::string& flag, const std::string& text, const ir::ParseOptions& opt) {
  try {
    return ir::parse(text, opt);
  } catch (const Error& e) {
    throw Error(flag + ": " + e.what());
  }
}

void add_uses(const ir::Expr& e, std::map<std::string, ir::BufferUse>* uses) {
  if (e.empty()) return;
  for (const ir::BufferUse& u : ir::buffers(e)) {
    auto [it, fresh] = uses->emplace(u.name, u);
    check(fresh || (it->second.dtype == u.dtype && it->second.rank == u.rank),
          "buffer '" + u.name + "' is read with different types or ranks by the mask and the score mod");
  }
}

bool compatible(DType given, DType wanted) {
  if (is_float(wanted)) return is_float(given);
  return given == wanted;
}

// Whether the product of `dims` (each >= 1) is at most kMaxElements, by division: each flag may be up to 2^31, so
// the product itself can wrap int64 (it did: -B -H -Q 2^31 passed as 0 elements and hung).
bool fits_elements(std::initializer_list<int64_t> dims) {
  int64_t left = kMaxElements;
  for (int64_t d : dims) {
    if (d > left) return false;
    left /= std::max<int64_t>(d, 1);
  }
  return true;
}

}  // namespace

HostTensor cast_tensor(const HostTensor& t, DType d) {
  if (t.dtype == d) return t;
  HostTensor r(d, t.shape);
  for (int64_t i = 0; i < t.numel(); ++i) r.set(i, t.get(i));
  return r;
}

ScalarArg parse_scalar_arg(const std::string& text) {
  auto [lhs, value] = split_assignment("--scalar", text);
  ScalarArg s;
  s.name = lhs;
  const size_t colon = lhs.find(':');
  int64_t iv = 0;
  const bool integral = parse_int(value, &iv);
  if (colon != std::string::npos) {
    s.name = lhs.substr(0, colon);
    s.typed = true;
    const std::string tname = lhs.substr(colon + 1);
    check(parse_dtype(tname, &s.type) &&
              (s.type == DType::F32 || s.type == DType::I32 || s.type == DType::I64 || s.type == DType::Bool),
          "--scalar " + text + ": type must be f32, i32, i64 or bool, got '" + tname + "'");
  } else {
    // As the Python tracer types a captured int: i32 when it fits, else i64.
    const bool i32 = iv >= -(int64_t(1) << 31) && iv < (int64_t(1) << 31);
    s.type = integral ? (i32 ? DType::I32 : DType::I64) : DType::F32;
  }
  check(!s.name.empty(), "--scalar " + text + ": missing the scalar name");
  if (s.type == DType::Bool && (value == "true" || value == "false")) {
    s.value = value == "true";
  } else if (s.type == DType::F32) {
    check(parse_double(value, &s.value), "--scalar " + text + ": expected a finite number, got '" + value + "'");
  } else {
    check(s.type != DType::Bool, "--scalar " + text + ": expected true or false, got '" + value + "'");
    check(integral, "--scalar " + text + ": expected an integer, got '" + value + "'");
    // Scalars travel as doubles: i32 must fit, and i64 must be exact in a double (|v| <= 2^53).
    const int64_t limit = s.type == DType::I32 ? int64_t(1) << 31 : int64_t(1) << 53;
    check(iv >= -limit && (s.type == DType::I32 ? iv < limit : iv <= limit),
          "--scalar " + text + ": out of range for " + std::string(dtype_name(s.type)) +
              (s.type == DType::I32 ? " ([-2^31, 2^31))" : " (|value| <= 2^53, exact in the double it travels as)"));
    s.value = double(iv);
  }
  return s;
}

namespace {
std::string scalar_text(double v) {
  char b[40];
  if (v == std::trunc(v) && std::fabs(v) <= 9007199254740992.0) std::snprintf(b, sizeof b, "%lld", (long long)v);
  else std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}
}  // namespace

ModBindings Problem::bindings() const {
  ModBindings b;
  b.scalars = scalars;
  for (const auto& [name, t] : buffers) b.buffers[name] = ir::BufferView{t.dtype, t.shape, t.data()};
  return b;
}

Problem make_problem(const ProblemConfig& c) {
  Problem p;
  p.dtype = c.dtype;
  auto& s = p.shape;
  s.seed = c.seed;

  // ---- inputs ----
  if (!c.load_dir.empty()) {
    check(fs::is_directory(c.load_dir), "--load " + c.load_dir + ": not a directory");
    p.q = load_input(c.load_dir, "q", c.dtype);
    p.k = load_input(c.load_dir, "k", c.dtype);
    p.v = load_input(c.load_dir, "v", c.dtype);
    s.B = p.q.dim(0), s.H = p.q.dim(1), s.Q = p.q.dim(2), s.D = p.q.dim(3);
    s.Hkv = p.k.dim(1), s.KV = p.k.dim(2), s.Dv = p.v.dim(3);
    check(p.k.dim(0) == s.B || p.k.dim(0) == 1, "--load: k.npy batch must be 1 or q's batch " + std::to_string(s.B));
    check(p.v.shape == std::vector<int64_t>{p.k.dim(0), s.Hkv, s.KV, s.Dv} && p.k.dim(3) == s.D,
          "--load: shapes do not fit together: q " + shape_string(p.q.shape) + ", k " + shape_string(p.k.shape) +
              ", v " + shape_string(p.v.shape) + " (need k [B|1, Hkv, KV, D], v [B|1, Hkv, KV, Dv])");
    agree(c.B, s.B, "-B", "q.shape[0]");
    agree(c.H, s.H, "-H", "q.shape[1]");
    agree(c.Q, s.Q, "-Q", "q.shape[2]");
    agree(c.D, s.D, "-D", "q.shape[3]");
    agree(c.Hkv, s.Hkv, "--hkv", "k.shape[1]");
    agree(c.KV, s.KV, "--kv", "k.shape[2]");
    agree(c.Dv, s.Dv, "--dv", "v.shape[3]");
  } else {
    s.B = c.B < 0 ? 1 : c.B;
    s.H = c.H < 0 ? 4 : c.H;
    s.Q = c.Q < 0 ? 128 : c.Q;
    s.D = c.D < 0 ? 64 : c.D;
    s.Hkv = c.Hkv < 0 ? s.H : c.Hkv;
    s.KV = c.KV < 0 ? s.Q : c.KV;
    s.Dv = c.Dv < 0 ? s.D : c.Dv;
  }
  check(s.H % s.Hkv == 0, "GQA: -H " + std::to_string(s.H) + " must be a multiple of --hkv " + std::to_string(s.Hkv));
  if (c.make_inputs)
    check(fits_elements({s.B, s.H, s.Q, std::max(s.D, s.Dv)}) && fits_elements({s.B, s.Hkv, s.KV, std::max(s.D, s.Dv)}),
          "shape too large: q/k/v may hold at most 2^31 elements each");
  else  // (`mask` makes no q / k / v: it blamed them, counting an implicit D = 64)
    check(fits_elements({s.B, s.H, s.Q}) && fits_elements({s.B, s.Hkv, s.KV}),
          "shape too large: B x H x Q (and B x Hkv x KV) may be at most 2^31 rows");
  if (c.load_dir.empty() && c.make_inputs) {
    p.q = random_tensor(c.dtype, {s.B, s.H, s.Q, s.D}, c.seed, 1);
    p.k = random_tensor(c.dtype, {s.B, s.Hkv, s.KV, s.D}, c.seed, 2);
    p.v = random_tensor(c.dtype, {s.B, s.Hkv, s.KV, s.Dv}, c.seed, 3);
  }
  if (c.backward && c.make_inputs) {
    const std::string dout_path = (fs::path(c.load_dir) / "dout.npy").string();
    if (!c.load_dir.empty() && fs::exists(dout_path)) {
      p.dout = load_input(c.load_dir, "dout", c.dtype);
      check(p.dout.shape == std::vector<int64_t>{s.B, s.H, s.Q, s.Dv},
            dout_path + ": expected shape " + shape_string({s.B, s.H, s.Q, s.Dv}) + ", got " + shape_string(p.dout.shape));
    } else {
      p.dout = random_tensor(c.dtype, {s.B, s.H, s.Q, s.Dv}, c.seed, 4);
    }
  }

  // ---- buffers given as files (their dtypes let text mods parse) ----
  std::map<std::string, HostTensor> given;
  std::map<std::string, std::string> given_from;  // name -> the flag that gave it
  for (const auto& [name, path] : c.buffer_files) {
    check(!given.count(name), "--buffer " + name + ": given more than once");
    given[name] = npy::read(path);
    given_from[name] = "--buffer " + name + "=" + path;
  }
  if (!c.load_dir.empty()) {
    for (const auto& entry : fs::directory_iterator(c.load_dir)) {
      const std::string f = entry.path().filename().string();
      if (f.rfind("buffer_", 0) != 0 || entry.path().extension() != ".npy") continue;
      const std::string name = f.substr(7, f.size() - 7 - 4);
      if (given.count(name)) continue;  // an explicit --buffer wins
      given[name] = npy::read(entry.path().string());
      given_from[name] = "--load " + entry.path().string();
    }
  }
  for (auto& [name, t] : given)
    if (t.dtype == DType::F64) t = cast_tensor(t, DType::F32);  // the IR has no f64 buffers

  // ---- scalars given on the command line ----
  std::map<std::string, ScalarArg> scalar_args;
  for (const std::string& text : c.scalar_args) {
    ScalarArg a = parse_scalar_arg(text);
    check(!scalar_args.count(a.name), "--scalar " + a.name + ": given more than once");
    scalar_args[a.name] = a;
  }

  // ---- mods ----
  check(c.mask_spec.empty() || c.mask_expr.empty(), "give --mask or --mask-expr, not both");
  check(c.score_spec.empty() || c.score_expr.empty(), "give --score or --score-expr, not both");
  std::vector<mods::ModSpec> specs;
  try {
    if (!c.mask_spec.empty()) specs.push_back(mods::lookup_mask(c.mask_spec));
  } catch (const Error& e) {
    throw Error(std::string("--mask: ") + e.what());
  }
  try {
    if (!c.score_spec.empty()) specs.push_back(mods::lookup_score(c.score_spec));
  } catch (const Error& e) {
    throw Error(std::string("--score: ") + e.what());
  }
  ir::ParseOptions opt;
  for (const auto& [name, t] : given) opt.buffer_dtypes[name] = t.dtype;
  for (const mods::ModSpec& m : specs)
    for (const mods::BufferSpec& b : m.buffers) opt.buffer_dtypes.emplace(b.name, b.dtype);
  for (const auto& [name, a] : scalar_args) opt.scalar_types[name] = a.type;
  for (const mods::ModSpec& m : specs) (m.is_mask ? p.variant.mask_mod : p.variant.score_mod) = m.expr;
  if (!c.mask_expr.empty()) p.variant.mask_mod = parse_mod("--mask-expr", c.mask_expr, opt);
  if (!c.score_expr.empty()) p.variant.score_mod = parse_mod("--score-expr", c.score_expr, opt);
  const ir::Expr& mask = p.variant.mask_mod;
  const ir::Expr& score = p.variant.score_mod;
  if (!mask.empty()) {
    check(mask.type() == DType::Bool, "--mask-expr: a mask_mod must return bool, this one returns " +
                                          std::string(dtype_name(mask.type())));
    check(!ir::depends_on(mask, ir::Op::Score), "--mask-expr: a mask_mod cannot read score");
  }
  if (!score.empty())
    check(score.type() != DType::Bool, "--score-expr: a score_mod must return a number, this one returns bool");
  p.label = "mask=" + (!c.mask_spec.empty() ? c.mask_spec : !c.mask_expr.empty() ? "'" + c.mask_expr + "'" : "none") +
            " score=" + (!c.score_spec.empty() ? c.score_spec : !c.score_expr.empty() ? "'" + c.score_expr + "'" : "none");

  // ---- bind buffers ----
  std::map<std::string, ir::BufferUse> uses;
  add_uses(mask, &uses);
  add_uses(score, &uses);
  for (const auto& [name, from] : given_from)
    check(uses.count(name) || from.rfind("--load", 0) == 0,
          from + ": the mods do not read a buffer named '" + name + "'");
  for (const auto& [name, use] : uses) {
    HostTensor t;
    std::string from;
    if (given.count(name)) {
      t = given[name];
      from = given_from[name];
    } else {
      const mods::BufferSpec* spec = nullptr;
      for (const mods::ModSpec& m : specs)
        for (const mods::BufferSpec& b : m.buffers)
          if (b.name == name) spec = &b;
      check(spec != nullptr, "buffer '" + name + "' is read by the mods but not given (use --buffer " + name + "=FILE.npy)");
      t = spec->make(s);
      from = "buffer '" + name + "'";
    }
    check(compatible(t.dtype, use.dtype), from + ": holds " + std::string(dtype_name(t.dtype)) +
                                              " but the mod reads it as " + std::string(dtype_name(use.dtype)));
    check(int(t.shape.size()) == use.rank, from + ": has shape " + shape_string(t.shape) + " but the mod indexes it with " +
                                               std::to_string(use.rank) + " indices");
    for (int64_t d : t.shape) check(d >= 1, from + ": every dimension must be >= 1, got shape " + shape_string(t.shape));
    p.buffers[name] = std::move(t);
  }

  // ---- bind scalars ----
  // The scalars the mods read, with the types they read them as (a library mod's have fixed types).
  std::map<std::string, std::set<DType>> scalar_types;
  for (const ir::Expr* e : {&mask, &score})
    if (!e->empty())
      for (const ir::Node* n : ir::topo_order(*e))
        if (n->op == ir::Op::Scalar) scalar_types[n->name].insert(n->type);
  for (const auto& [name, a] : scalar_args)
    check(scalar_types.count(name), "--scalar " + name + ": the mods do not read a scalar named '" + name + "'");
  for (const auto& [name, types] : scalar_types) {
    if (scalar_args.count(name)) {
      const ScalarArg& a = scalar_args[name];
      // A value whose type was inferred serves any numeric type that holds it exactly (H=4 or H=4.0 for an i32 H,
      // 30 for an f32 cap); a written type must be the mods' own. Otherwise it was converted silently: H:f32=4.9
      // ran alibi's i32 H as 4, H:bool=true as 1.
      for (const DType want : types) {
        const bool integral = a.value == std::trunc(a.value) && a.type != DType::Bool;
        const bool exact = a.type == want || (!a.typed && want == DType::F32 && is_int(a.type)) ||
                           (!a.typed && is_int(want) && integral &&
                            (want == DType::I64 || (a.value >= -2147483648.0 && a.value < 2147483648.0)));
        check(exact, "--scalar " + name + ": the mods read " + name + " as " + std::string(dtype_name(want)) +
                         ", got " + std::string(dtype_name(a.type)) + " " + scalar_text(a.value) + " (give --scalar " +
                         name + ":" + std::string(dtype_name(want)) + "=VALUE)");
      }
      p.scalars[name] = a.value;
      continue;
    }
    const mods::ScalarSpec* spec = nullptr;
    for (const mods::ModSpec& m : specs)
      for (const mods::ScalarSpec& sc : m.scalars)
        if (sc.name == name) spec = &sc;
    check(spec != nullptr, "scalar '" + name + "' is read by the mods but not given (use --scalar " + name + "=VALUE)");
    p.scalars[name] = spec->value(s);
  }

  // ---- gradients: float buffers read only by the score mod (torch: mask buffers never require grad) ----
  if (!score.empty()) {
    std::set<std::string> mask_reads;
    if (!mask.empty())
      for (const ir::BufferUse& u : ir::buffers(mask)) mask_reads.insert(u.name);
    for (const ir::BufferUse& u : ir::buffers(score)) {
      bool trainable = is_float(u.dtype) && !mask_reads.count(u.name);
      for (const mods::ModSpec& m : specs)
        for (const mods::BufferSpec& b : m.buffers)
          if (b.name == u.name) trainable = trainable && b.trainable;
      if (trainable) p.variant.grad_buffers.push_back(u.name);
    }
  }
  return p;
}

BlockMask make_block_mask(const Problem& p, int block, bool use_kv_range) {
  const ir::Expr mask = p.variant.mask_mod.empty() ? mods::full() : p.variant.mask_mod;
  const int64_t B = ir::depends_on(mask, ir::Op::Batch) ? p.shape.B : 1;
  const int64_t H = ir::depends_on(mask, ir::Op::Head) ? p.shape.H : 1;
  const ModBindings binds = p.bindings();
  // One interval of kv per row: classified from the rows' bounds (flexattn/cpu_variant.h).
  if (use_kv_range)
    if (MaskRowRangeFn range = ir::kv_range_rows(mask, eval_env(binds)))
      return build_block_mask_from_ranges(range, B, H, p.shape.Q, p.shape.KV, block, block);
  const ir::EvalEnv env = eval_env(binds);
  // One evaluator per call: rows are evaluated on several threads and an Evaluator is single-threaded.
  MaskRowFn row = [&](int64_t b, int64_t h, int64_t q, int64_t kv_begin, int64_t kv_end, uint8_t* out) {
    ir::Evaluator ev(mask);
    ev.bind(env);
    for (int64_t kv = kv_begin; kv < kv_end; ++kv) out[kv - kv_begin] = ev.run(0.0, b, h, q, kv).as_bool();
  };
  return build_block_mask(row, B, H, p.shape.Q, p.shape.KV, block, block);
}

}  // namespace flexattn::cli
