// IR -> CUDA C++ variant functor. One temporary per DAG node (common subexpressions computed once);
// leaves are inlined. Every node is printed as the definition in src/ir/eval.cc prescribes, through
// the helpers of kernels/common/mod_ops.cuh. Its only other decisions are about cost, each kept within
// the stated accuracy: integer literal divisors of // and % compiled in (divisor()), float division by
// a uniform value as a reciprocal multiply (uniform()), i32 gather indices clamped in 32 bits with the
// row offset apart (flat_index()).
#include <functional>
#include <set>
#include <utility>
#include <sstream>
#include <unordered_map>

#include "flexattn/codegen.h"
#include "flexattn/error.h"
#include "flexattn/ir_passes.h"
#include "flexattn/ir_text.h"

namespace flexattn::codegen {

namespace {

using flexattn::DType;
using ir::Node;
using ir::Op;

const char* ctype(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::I32: return "int";
    case DType::I64: return "long long";
    case DType::F32: return "float";
    default: break;
  }
  throw Error("codegen: value type " + std::string(dtype_name(t)) + " cannot appear in a mod");
}

const char* reader(DType buffer_dtype) {
  switch (buffer_dtype) {
    case DType::F32: return "fa_read_f32";
    case DType::BF16: return "fa_read_bf16";
    case DType::F16: return "fa_read_f16";
    case DType::I32: return "fa_read_i32";
    case DType::I64: return "fa_read_i64";
    case DType::Bool: return "fa_read_bool";
    default: break;
  }
  throw Error("codegen: buffers of " + std::string(dtype_name(buffer_dtype)) + " are not supported");
}

// Emits the statements computing a set of roots inside one device function.
class FunctionEmitter {
 public:
  FunctionEmitter(const VariantLayout& layout, std::ostringstream& out) : layout_(layout), out_(out) {}

  // Returns the C++ expression naming the value of `n` (a temporary or an inlined leaf).
  std::string value(const Node* n) {
    auto it = names_.find(n);
    if (it != names_.end()) return it->second;
    std::string text = fused(*n);  // emits only the operands it uses
    if (text.empty()) {
      for (const NodePtrRef& a : n->args) value(a.get());
      text = print_node(*n);
    }
    if (n->args.empty()) {
      names_[n] = text;
      return text;
    }
    std::string name = "t" + std::to_string(next_++);
    out_ << "    const " << ctype(n->type) << " " << name << " = " << text << ";\n";
    names_[n] = name;
    return name;
  }

  // score_mod = u * tanh(score * k) (softcap; also tanh(score / d) * u, tanh(score) * u) with u and k
  // uniform, tanh either node (Tanh or TanhApprox): emits their temporaries and returns {u, k} as f32
  // expressions and the tanh's node, or {"", "", Tanh} when `root` is not of that shape. The sm90 forward's
  // softcap path (fwd_softmax_sm90.cuh) evaluates the mod from them with the score scale and log2(e) folded
  // into two per-tile constants.
  struct SoftcapParts {
    std::string u, k;
    Op tanh = Op::Tanh;
  };
  SoftcapParts softcap_parts(const Node* root) {
    for (Op op : {Op::Tanh, Op::TanhApprox}) {
      const Node* u = nullptr;
      const Node* th = root == nullptr ? nullptr : uniform_times_tanh(*root, &u, op);
      if (th == nullptr || th->type != DType::F32) continue;
      const Node* x = th->args[0].get();
      if (x->op == Op::Score) return {as(u, DType::F32), "1.0f", op};
      const Scaled sx = scaled(x);
      if (sx.k.empty() || sx.x_node->op != Op::Score) return {};
      return {as(u, DType::F32), sx.k, op};
    }
    return {};
  }

  // The value of `n` converted to `to`: promotion's implicit widening, or (a weak i64 operand taken as i32,
  // kv_range bounds) the wrapping narrowing the interpreter's convert() does.
  std::string as(const Node* n, DType to) {
    const std::string v = value(n);
    if (n->type == to) return v;
    if (to == DType::Bool) return "(" + v + " != 0)";
    if (n->type == DType::Bool) return std::string("(") + v + " ? (" + ctype(to) + ")1 : (" + ctype(to) + ")0)";
    return std::string("((") + ctype(to) + ")" + v + ")";
  }

  // Where a Load reads, as "row, col" arguments of the fa_read_* helpers (element row + col of the
  // buffer's flat storage) or, when the last index is not i32, as one flat 64-bit offset. Every index is
  // clamped (fa_clamp_index*); an i32 index in 32 bits (~4 instructions per entry instead of ~20). The
  // split lets the compiler form the row's address once (rows are indexed by h, b, ... in practice) and
  // reach an entry with one IMAD.WIDE.U32 instead of a 64-bit multiply-add, shift and add.
  struct FlatIndex {
    std::string row, col;  // col empty: row is the whole flat offset
  };
  FlatIndex flat_index(const Node& load, int slot) {
    const size_t last = load.args.size() - 1;
    const std::string row = rows_before_last(load, slot);
    if (load.args[last]->type == DType::I32) {
      const std::string col = clamp32(load.args[last].get()) + "(" + value(load.args[last].get()) + ", " +
                              buf_size(slot, last) + ")";
      return {last == 0 ? std::string("0LL") : "(" + row + ") * " + buf_size(slot, last), col};
    }
    return {last == 0 ? clamped(load, slot, last) : "(" + row + ") * " + buf_size(slot, last) + " + " + clamped(load, slot, last),
            ""};
  }
  // The element offset of the row that a load's last index walks (every index but the last, clamped): the
  // "row" of an i32-indexed FlatIndex.
  std::string row_offset(const Node& load, int slot) {
    const size_t last = load.args.size() - 1;
    return last == 0 ? std::string("0LL") : "(" + rows_before_last(load, slot) + ") * " + buf_size(slot, last);
  }
  std::string buf_size(int slot, size_t d) {
    return "p.buf_shape[" + std::to_string(slot) + "][" + std::to_string(d) + "]";
  }

 private:
  using NodePtrRef = ir::NodePtr;

  std::string clamped(const Node& load, int slot, size_t d) {
    const Node* i = load.args[d].get();
    if (i->type == DType::I32) return "(long long)" + clamp32(i) + "(" + value(i) + ", " + buf_size(slot, d) + ")";
    return "fa_clamp_index((long long)" + value(i) + ", " + buf_size(slot, d) + ")";
  }
  // The kernels hand the mods b, h, q_idx and kv_idx never negative (padded lanes see positions past the end,
  // not before the start), so an index that is one of them needs only the upper clamp: fewer instructions per
  // entry, and a shorter compile (the document mask's sm90 forward at D = 128, nvcc 13.0 here: ptxas 545 -> 440 ms,
  // NVVM 623-711 -> 624 ms, about causal's 572 / 423).
  static std::string clamp32(const Node* i) {
    const bool position = i->op == Op::Batch || i->op == Op::Head || i->op == Op::QIdx || i->op == Op::KvIdx;
    return position ? "fa_clamp_position32" : "fa_clamp_index32";
  }
  std::string rows_before_last(const Node& load, int slot) {
    std::string row;
    for (size_t d = 0; d + 1 < load.args.size(); ++d)
      row = d == 0 ? clamped(load, slot, d) : "(" + row + ") * " + buf_size(slot, d) + " + " + clamped(load, slot, d);
    return row;
  }

  std::string call(const char* f, const std::string& a) { return std::string(f) + "(" + a + ")"; }

  std::string print_node(const Node& n) {
    const DType t = n.type;
    const bool f = t == DType::F32;
    auto a0 = [&](DType to) { return as(n.args[0].get(), to); };
    auto a1 = [&](DType to) { return as(n.args[1].get(), to); };
    auto float_fn = [&](const char* fn) { return call(fn, a0(DType::F32)); };
    switch (n.op) {
      case Op::Score: return "score";
      case Op::Batch: return "b";
      case Op::Head: return "h";
      case Op::QIdx: return "q_idx";
      case Op::KvIdx: return "kv_idx";
      case Op::Literal: {
        const std::string slot = "p.lit[" + std::to_string(literal_slot(&n)) + "]";
        if (t == DType::Bool) return "(" + slot + " != 0.0)";
        return std::string("((") + ctype(t) + ")" + slot + ")";
      }
      case Op::Scalar: {
        const std::string slot = "p.scalar[" + std::to_string(layout_.scalar_slot(n.name)) + "]";
        if (t == DType::Bool) return "(" + slot + " != 0.0)";
        return std::string("((") + ctype(t) + ")" + slot + ")";
      }
      case Op::Load: {
        const int slot = layout_.buffer_slot(n.name);
        const FlatIndex at = flat_index(n, slot);
        return std::string(reader(n.buffer_dtype)) + "(p.buf[" + std::to_string(slot) + "], " + at.row +
               (at.col.empty() ? "" : ", " + at.col) + ")";
      }
      case Op::Neg: return f ? "(-" + a0(t) + ")" : call("fa_neg", a0(t));
      case Op::Abs: return f ? call("fabsf", a0(t)) : call("fa_abs", a0(t));
      case Op::Exp: return float_fn("expf");
      case Op::Exp2: return float_fn("exp2f");
      case Op::Log: return float_fn("logf");
      case Op::Log2: return float_fn("log2f");
      case Op::Sqrt: return float_fn("sqrtf");
      case Op::Rsqrt: return float_fn("fa_rsqrt");
      case Op::Tanh: return float_fn("fa_tanh");
      case Op::TanhApprox: return float_fn("fa_tanh_approx");
      case Op::Sigmoid: return float_fn("fa_sigmoid");
      case Op::Sin: return float_fn("sinf");
      case Op::Cos: return float_fn("cosf");
      case Op::Tan: return float_fn("tanf");
      case Op::Erf: return float_fn("erff");
      case Op::Floor: return f ? call("floorf", a0(t)) : a0(t);
      case Op::Detach: return a0(t);
      case Op::Ceil: return f ? call("ceilf", a0(t)) : a0(t);
      case Op::Not: return "(!" + a0(DType::Bool) + ")";
      case Op::Cast: {
        const DType from = n.args[0]->type;
        if (from == DType::F32 && t == DType::I32) return call("fa_f2i", value(n.args[0].get()));
        if (from == DType::F32 && t == DType::I64) return call("fa_f2ll", value(n.args[0].get()));
        return a0(t);
      }
      case Op::Add: return f ? "(" + a0(t) + " + " + a1(t) + ")" : "fa_add(" + a0(t) + ", " + a1(t) + ")";
      case Op::Sub: return f ? "(" + a0(t) + " - " + a1(t) + ")" : "fa_sub(" + a0(t) + ", " + a1(t) + ")";
      case Op::Mul: return f ? "(" + a0(t) + " * " + a1(t) + ")" : "fa_mul(" + a0(t) + ", " + a1(t) + ")";
      case Op::Div:
        if (uniform(n.args[1].get())) return "(" + a0(DType::F32) + " * fa_rcp(" + a1(DType::F32) + "))";
        return "(" + a0(DType::F32) + " / " + a1(DType::F32) + ")";
      case Op::FloorDiv: return (f ? "fa_floordiv_f(" : "fa_floordiv(") + a0(t) + ", " + divisor(n) + ")";
      case Op::Mod: return (f ? "fa_mod_f(" : "fa_mod(") + a0(t) + ", " + divisor(n) + ")";
      case Op::Min: return (f ? "fa_min_f(" : "fa_min_i(") + a0(t) + ", " + a1(t) + ")";
      case Op::Max: return (f ? "fa_max_f(" : "fa_max_i(") + a0(t) + ", " + a1(t) + ")";
      case Op::Pow: return (f ? "powf(" : "fa_pow_i(") + a0(t) + ", " + a1(t) + ")";
      case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: {
        DType ct = ir::promote(*n.args[0], *n.args[1]);
        if (ct == DType::Bool) ct = DType::I32;
        static const char* kSym[] = {"==", "!=", "<", "<=", ">", ">="};
        const char* sym = kSym[int(n.op) - int(Op::Eq)];
        return "(" + a0(ct) + " " + sym + " " + a1(ct) + ")";
      }
      case Op::BitAnd: return "(" + a0(t) + " & " + a1(t) + ")";
      case Op::BitOr: return "(" + a0(t) + " | " + a1(t) + ")";
      case Op::Shl: return "fa_shl(" + a0(t) + ", " + a1(t) + ")";
      case Op::Shr: return "fa_shr(" + a0(t) + ", " + a1(t) + ")";
      case Op::And: return "(" + a0(DType::Bool) + " && " + a1(DType::Bool) + ")";
      case Op::Or: return "(" + a0(DType::Bool) + " || " + a1(DType::Bool) + ")";
      case Op::Select:
        return "(" + as(n.args[0].get(), DType::Bool) + " ? " + as(n.args[1].get(), t) + " : " +
               as(n.args[2].get(), t) + ")";
    }
    throw Error("codegen: unknown IR node");
  }

  // The second operand of // and %. An integer literal divisor is written into the source: a division by
  // a runtime value is a ~20-instruction sequence per entry (two per entry for `q_idx // 256 ==
  // kv_idx // 256`: on the H200 such a document mask ran its 6 % of tiles in 74 % of the dense time),
  // by a constant a shift or a multiply. The cost is one compile per divisor value, as torch.compile
  // specialises on captured Python ints.
  std::string divisor(const Node& n) {
    const Node* d = n.args[1].get();
    const DType t = n.type;
    if (t == DType::F32 || d->op != Op::Literal || d->type == DType::F32 || d->type == DType::Bool)
      return as(d, t);
    const long long v = static_cast<long long>(d->value);
    if (v == (-9223372036854775807LL - 1)) return as(d, t);  // no literal spelling in C++
    if (t == DType::I32) return "((int)" + std::to_string(v) + ")";
    return "((long long)" + std::to_string(v) + "LL)";
  }

  // tanh(x * k) and u * tanh(x * k) with k, u uniform (softcap: cap * tanh(score / cap)): the
  // fa_tanh_scaled / fa_mul_tanh forms of mod_ops.cuh fold k and u into their own constants (3 FMULs
  // less per entry). "" when `n` is not of that shape.
  std::string fused(const Node& n) {
    if (n.type != DType::F32) return "";
    if (n.op == Op::Tanh) {
      const Scaled x = scaled(n.args[0].get());
      return x.k.empty() ? "" : "fa_tanh_scaled(" + x.x + ", " + x.k + ")";
    }
    const Node* u = nullptr;
    const Node* th = uniform_times_tanh(n, &u);
    if (th == nullptr) return "";
    const Scaled x = scaled(th->args[0].get());
    return "fa_mul_tanh(" + as(u, DType::F32) + ", " +
           (x.k.empty() ? as(th->args[0].get(), DType::F32) + ", 1.0f" : x.x + ", " + x.k) + ")";
  }

  // n = u * tanh(a) or tanh(a) * u with u uniform and tanh the node `tanh_op`: the tanh node (and *u); null when
  // n is not of that shape.
  const Node* uniform_times_tanh(const Node& n, const Node** u, Op tanh_op = Op::Tanh) {
    if (n.type != DType::F32 || n.op != Op::Mul) return nullptr;
    for (int i : {0, 1}) {
      const Node* f = n.args[size_t(i)].get();
      const Node* th = n.args[size_t(1 - i)].get();
      if (uniform(f) && th->op == tanh_op) {
        *u = f;
        return th;
      }
    }
    return nullptr;
  }

  // `a` as x * k with k uniform (a product with a uniform factor, or a quotient by a uniform divisor:
  // k = fa_rcp of it, as Op::Div prints it), for the tanh forms of mod_ops.cuh that fold k into their
  // own scale. k empty: no such form.
  struct Scaled {
    std::string x, k;
    const Node* x_node = nullptr;
  };
  Scaled scaled(const Node* a) {
    if (a->type != DType::F32) return {};
    const Node* l = a->args.size() == 2 ? a->args[0].get() : nullptr;
    const Node* r = a->args.size() == 2 ? a->args[1].get() : nullptr;
    if (a->op == Op::Div && uniform(r)) return {as(l, DType::F32), "fa_rcp(" + as(r, DType::F32) + ")", l};
    if (a->op == Op::Mul && uniform(r)) return {as(l, DType::F32), as(r, DType::F32), l};
    if (a->op == Op::Mul && uniform(l)) return {as(r, DType::F32), as(l, DType::F32), r};
    return {};
  }

  // True for a value that is the same for every entry of every kernel launch: literals, scalars and
  // expressions of only those (no score, b, h, q_idx, kv_idx, no buffer load). A float division by such a
  // value is emitted as a multiplication by its IEEE reciprocal (fa_rcp), which the compiler computes
  // once: within 2 ulp of the IEEE quotient, as faithful as torch flex's Triton kernels, which compile f32
  // `/` to div.full.f32 (2 ulp; triton-lang/triton#10661). IEEE division per entry is ~10 instructions
  // and a slow-path call (softcap: 388 calls in the sm90 forward's SASS). A divisor that varies per entry
  // keeps IEEE division: an approximate one everywhere pushed sm90 backward and sm80 kernels into spills.
  // The CPU interpreter (src/ir/eval.cc) keeps its exact division: the tolerance tests compare to it.
  bool uniform(const Node* n) {
    auto it = uniform_.find(n);
    if (it != uniform_.end()) return it->second;
    bool u = true;
    switch (n->op) {
      case Op::Literal: case Op::Scalar: break;
      case Op::Score: case Op::Batch: case Op::Head: case Op::QIdx: case Op::KvIdx: case Op::Load: u = false; break;
      default:
        for (const NodePtrRef& a : n->args) u = u && uniform(a.get());
    }
    uniform_[n] = u;
    return u;
  }

  int literal_slot(const Node* n) {
    for (size_t i = 0; i < layout_.literals.size(); ++i)
      if (layout_.literals[i].get() == n) return int(i);
    throw Error("codegen: internal: literal without a slot");
  }

  const VariantLayout& layout_;
  std::ostringstream& out_;
  std::unordered_map<const Node*, std::string> names_;
  std::unordered_map<const Node*, bool> uniform_;
  int next_ = 0;
};

// The mod as text with every literal shown as its slot (lit0, lit1, ...): the comment must not carry
// literal values, or two variants differing only in a value would get different sources (and keys).
std::string structural_text(const ir::Expr& e, const VariantLayout& layout) {
  std::unordered_map<const Node*, ir::Expr> rebuilt;
  for (const Node* n : ir::topo_order(e)) {
    if (n->op == Op::Literal) {
      int slot = 0;
      while (slot < int(layout.literals.size()) && layout.literals[size_t(slot)].get() != n) ++slot;
      rebuilt[n] = ir::scalar("lit" + std::to_string(slot), n->type);
      continue;
    }
    std::vector<ir::Expr> args;
    for (const ir::NodePtr& a : n->args) args.push_back(rebuilt.at(a.get()));
    rebuilt[n] = ir::make_node(n->op, n->type, n->weak, args, n->value, n->name, n->buffer_dtype);
  }
  // The printer may bind shared subexpressions on lines of their own: keep every line a comment.
  std::string text = ir::print(rebuilt.at(e.get())), out;
  for (char c : text) out += c == '\n' ? std::string("\n//     ") : std::string(1, c);
  return out;
}

// score_mod = score + c * (kv_idx - q_idx) (or score - c * (q_idx - kv_idx), the product either way
// round, the difference cast to f32 or promoted) with c free of score, q_idx and kv_idx (ALiBi: c =
// slope of h, a formula or a buffer read by h). Returns c and whether rel_slope is -c (q_idx - kv_idx, or
// a subtracted term; negation is exact); null when the mod is not of that shape. The kernels that know the form
// (fwd_softmax_sm90.cuh, FLEXATTN_SM90_AFFINE) evaluate the bias per tile as an affine function of the
// column: c * (kv0 - q) once per row, + c * k per entry (k the column inside the tile).
struct RelAffine {
  const Node* coef = nullptr;
  bool negate = false;
};
bool depends_on_position(const Node* n) {
  if (n->op == Op::Score || n->op == Op::QIdx || n->op == Op::KvIdx) return true;
  for (const ir::NodePtr& a : n->args)
    if (depends_on_position(a.get())) return true;
  return false;
}
RelAffine rel_affine(const ir::Expr& e) {
  const Node* n = e.get();
  if (n == nullptr || n->type != DType::F32 || (n->op != Op::Add && n->op != Op::Sub)) return {};
  for (int si : {0, 1}) {
    if (n->op == Op::Sub && si == 1) break;  // c * rel - score is not score + ...
    const Node* sc = n->args[size_t(si)].get();
    const Node* term = n->args[size_t(1 - si)].get();
    if (sc->op != Op::Score || term->op != Op::Mul || term->type != DType::F32) continue;
    for (int ri : {0, 1}) {
      const Node* rel = term->args[size_t(ri)].get();
      const Node* c = term->args[size_t(1 - ri)].get();
      if (rel->op == Op::Cast && rel->type == DType::F32) rel = rel->args[0].get();
      if (rel->op != Op::Sub || (rel->type != DType::I32 && rel->type != DType::I64)) continue;
      const Op a = rel->args[0]->op, b = rel->args[1]->op;
      bool neg;
      if (a == Op::KvIdx && b == Op::QIdx) neg = false;
      else if (a == Op::QIdx && b == Op::KvIdx) neg = true;
      else continue;
      if (depends_on_position(c) || c->type == DType::Bool) continue;
      return {c, neg != (n->op == Op::Sub)};
    }
  }
  return {};
}

// score_mod = score + buf[i0, .., sign * (q_idx - kv_idx) + c] (either operand order; a relative-position
// bias such as bias[h, q_idx - kv_idx + S - 1]): an f32 buffer, the last index i32 and a sum / difference
// of q_idx, kv_idx (coefficients +-1, opposite) and terms free of the positions and the score (c), every
// other index free of them too. The sm90 forward (fwd_softmax_sm90.cuh, scores_inside_rel_gather) then
// reads the row once per tile as row[base - 8i - e] at compile-time offsets, 34 loads per thread and tile
// for 64 entries, instead of an index, a clamp and an address per entry; the clamp is checked per tile.
struct RelGather {
  const Node* load = nullptr;
  int sign = 0;                                  // +1: q_idx - kv_idx, -1: kv_idx - q_idx
  std::vector<std::pair<const Node*, int>> c;   // the constant terms and their signs
};
bool rel_gather_terms(const Node* n, int sign, int* q, int* kv, std::vector<std::pair<const Node*, int>>* c) {
  if (!depends_on_position(n)) {  // an i32 / i64 term, taken as i32 as the node using it takes it
    if (n->type != DType::I32 && n->type != DType::I64) return false;
    c->push_back({n, sign});
    return true;
  }
  if (n->type != DType::I32) return false;
  if (n->op == Op::QIdx) return *q += sign, true;
  if (n->op == Op::KvIdx) return *kv += sign, true;
  if (n->op == Op::Add || n->op == Op::Sub)
    return rel_gather_terms(n->args[0].get(), sign, q, kv, c) &&
           rel_gather_terms(n->args[1].get(), n->op == Op::Sub ? -sign : sign, q, kv, c);
  return false;
}
// score_mod = score + x (si = 0) or x + score (si = 1), f32: x, else null. The shape rel_gather and rel_diag_term
// look for.
const ir::NodePtr* added_to_score(const ir::Expr& e, int si) {
  const Node* n = e.get();
  if (n == nullptr || n->type != DType::F32 || n->op != Op::Add || n->args[size_t(si)]->op != Op::Score) return nullptr;
  return &n->args[size_t(1 - si)];
}
RelGather rel_gather(const ir::Expr& e) {
  for (int si : {0, 1}) {
    const ir::NodePtr* x = added_to_score(e, si);
    const Node* ld = x ? x->get() : nullptr;
    if (ld == nullptr || ld->op != Op::Load || ld->type != DType::F32 || ld->buffer_dtype != DType::F32) continue;
    bool rows_fixed = true;
    for (size_t d = 0; d + 1 < ld->args.size(); ++d) rows_fixed = rows_fixed && !depends_on_position(ld->args[d].get());
    RelGather g;
    int q = 0, kv = 0;
    if (!rows_fixed || !rel_gather_terms(ld->args.back().get(), 1, &q, &kv, &g.c) || (q != 1 && q != -1) || kv != -q)
      continue;
    g.load = ld;
    g.sign = q;
    return g;
  }
  return {};
}

// score_mod = score + e (either order), e an f32 value that depends on the positions only through q_idx - kv_idx
// (ir::position_dependence: Diagonal; T5's bucketed bias, any formula of the distance). The sm90 forward
// (fwd_rel_diag_sm90.cuh, FLEXATTN_SM90_REL_DIAG) then evaluates e once per distance a warp's tile spans (BN + 15 of
// them, the lanes in turn, into shared memory) instead of once per entry, and reads it back like the rel-gather
// row. Null when the mod is not of that shape.
const Node* rel_diag_term(const ir::Expr& e) {
  for (int si : {0, 1}) {
    const ir::NodePtr* x = added_to_score(e, si);
    if (x != nullptr && (*x)->type == DType::F32 &&
        ir::position_dependence(ir::Expr(*x)) == ir::PositionDependence::Diagonal)
      return x->get();
  }
  return nullptr;
}

// 1: the one gradient load's index is free of q_idx / kv_idx (alibi_slopes' slopes[h]); 2: it depends on
// them only through q_idx - kv_idx (relative bias, T5); 0: per-entry atomics only. Several gradient
// loads keep the per-entry path (one reduction each would hold that many more accumulators).
int buffer_grad_reduce(const std::vector<ir::LoadGrad>& grads) {
  if (grads.size() != 1) return 0;
  switch (ir::position_dependence(grads[0].load)) {
    case ir::PositionDependence::None: return 1;
    case ir::PositionDependence::Diagonal: return 2;
    case ir::PositionDependence::General: return 0;
  }
  return 0;
}

const char* kSignature = "const ModParams& p, float score, int b, int h, int q_idx, int kv_idx";
const char* kMaskSignature = "const ModParams& p, int b, int h, int q_idx, int kv_idx";

}  // namespace

VariantLayout make_layout(const std::vector<ir::Expr>& roots, const std::vector<std::string>& grad_buffers);

GeneratedVariant emit_cuda_variant(const Variant& variant, bool with_backward) {
  const ir::Expr score_mod = variant.score_mod.empty() ? ir::Expr() : ir::simplify(variant.score_mod);
  const ir::Expr mask_mod = variant.mask_mod.empty() ? ir::Expr() : ir::simplify(variant.mask_mod);
  if (!score_mod.empty()) ir::verify_score_mod(score_mod);
  if (!mask_mod.empty()) ir::verify_mask_mod(mask_mod);

  ir::ScoreModGrad grad;
  std::vector<ir::LoadGrad> grads;
  if (with_backward && !score_mod.empty()) {
    grad = ir::differentiate(score_mod, variant.grad_buffers);
    for (const ir::LoadGrad& g : grad.loads)
      if (!(g.derivative->op == Op::Literal && g.derivative->value == 0.0)) grads.push_back(g);
  }
  std::vector<ir::Expr> roots;
  for (const ir::Expr& e : {score_mod, mask_mod, grad.d_score})
    if (!e.empty()) roots.push_back(e);
  for (const ir::LoadGrad& g : grads) roots.push_back(g.derivative), roots.push_back(g.load);

  GeneratedVariant gen;
  gen.layout = make_layout(roots, variant.grad_buffers);
  gen.has_mask_mod = !mask_mod.empty();
  const VariantLayout& layout = gen.layout;
  std::ostringstream out;
  out << "// Generated by flexattn codegen from:\n";
  out << "//   score_mod: " << (score_mod.empty() ? "score" : structural_text(score_mod, layout)) << "\n";
  out << "//   mask_mod:  " << (mask_mod.empty() ? "true" : structural_text(mask_mod, layout)) << "\n";
  out << "struct FlexVariant {\n";
  out << "  static constexpr bool kHasScoreMod = " << (score_mod.empty() ? "false" : "true") << ";\n";
  out << "  static constexpr bool kHasMaskMod = " << (mask_mod.empty() ? "false" : "true") << ";\n";
  out << "  static constexpr bool kHasBufferGrad = " << (grads.empty() ? "false" : "true") << ";\n\n";
  gen.has_buffer_grad = !grads.empty();

  out << "  __device__ __forceinline__ static float score_mod(" << kSignature << ") {\n";
  if (score_mod.empty()) {
    out << "    return score;\n";
  } else {
    FunctionEmitter fe(layout, out);
    const std::string r = fe.as(score_mod.get(), DType::F32);  // emits the temporaries first
    out << "    return " << r << ";\n";
  }
  out << "  }\n\n";

  out << "  __device__ __forceinline__ static bool mask_mod(" << kMaskSignature << ") {\n";
  if (mask_mod.empty()) {
    out << "    return true;\n";
  } else {
    FunctionEmitter fe(layout, out);
    const std::string r = fe.as(mask_mod.get(), DType::Bool);
    out << "    return " << r << ";\n";
  }
  out << "  }\n\n";

  // Only masks of one kv interval per row get the block (other sources stay as they were): the kernels test
  // for V::kKvRange (fwd_softmax_sm90.cuh KvRangeOf).
  if (const ir::KvRange range = ir::kv_range(mask_mod); range.ok()) {
    FunctionEmitter fe(layout, out);
    std::function<std::string(int)> bound = [&](int i) -> std::string {
      const ir::KvBound& n = range.nodes[size_t(i)];
      switch (n.kind) {
        case ir::KvBound::Open: return n.sign < 0 ? "(-kFaKvOpen)" : "kFaKvOpen";
        case ir::KvBound::Term: {
          std::string v = std::string(n.sign < 0 ? "-" : "") + "fa_kv_sat((long long)" + fe.as(n.e.get(), n.e_type) + ")";
          if (n.with_q) v = "(long long)q_idx + " + v;
          if (n.adj != 0) v += n.adj < 0 ? " - 1" : " + 1";
          return "(" + v + ")";
        }
        case ir::KvBound::Max: return "fa_max_i(" + bound(n.a) + ", " + bound(n.b) + ")";
        case ir::KvBound::Min: return "fa_min_i(" + bound(n.a) + ", " + bound(n.b) + ")";
        case ir::KvBound::Select:
          return "(" + std::string(n.pred_neg ? "!" : "") + fe.as(n.pred.get(), DType::Bool) + " ? " + bound(n.a) +
                 " : " + bound(n.b) + ")";
      }
      throw Error("codegen: unknown kv bound");
    };
    out << "  // mask_mod == (lo <= kv_idx && kv_idx <= hi), lo and hi from kv_range: yes\n";
    out << "  static constexpr bool kKvRange = true;\n";
    out << "  __device__ __forceinline__ static void kv_range(const ModParams& p, int b, int h, int q_idx, long long& lo, "
           "long long& hi) {\n";
    const std::string lo = bound(range.lo), hi = bound(range.hi);  // emits the temporaries first
    out << "    lo = " << lo << ";\n    hi = " << hi << ";\n  }\n\n";
    gen.kv_range = true;
  }

  const RelAffine rel = rel_affine(score_mod);
  out << "  // score_mod == score + rel_slope(p, b, h) * (kv_idx - q_idx): " << (rel.coef ? "yes" : "no") << "\n";
  out << "  static constexpr bool kRelAffine = " << (rel.coef ? "true" : "false") << ";\n";
  gen.rel_affine = bool(rel.coef);
  out << "  __device__ __forceinline__ static float rel_slope(const ModParams& p, int b, int h) {\n";
  if (rel.coef) {
    FunctionEmitter fe(layout, out);
    const std::string r = fe.as(rel.coef, DType::F32);
    out << "    return " << (rel.negate ? "-" : "") << r << ";\n";
  } else {
    out << "    return 0.0f;\n";
  }
  out << "  }\n\n";
  // Only variants of the rel-gather shape get the block (other sources stay as they were): the kernels test
  // for V::kRelGather (fwd_softmax_sm90.cuh RelGatherOf).
  if (const RelGather g = rel_gather(score_mod); g.load != nullptr) {
    const int slot = layout.buffer_slot(g.load->name);
    const size_t last = g.load->args.size() - 1;
    out << "  // score_mod == score + row(b, h)[" << (g.sign > 0 ? "q_idx - kv_idx" : "kv_idx - q_idx")
        << " + c], f32, row and c from rel_gather: yes\n";
    out << "  static constexpr int kRelGather = " << g.sign << ";\n";
    out << "  __device__ __forceinline__ static const float* rel_gather(const ModParams& p, int b, int h, int& c, int& n) {\n";
    FunctionEmitter fe(layout, out);
    std::string c;
    for (const auto& [term, sign] : g.c) {
      const std::string v = fe.as(term, DType::I32);
      c = c.empty() ? (sign > 0 ? v : "fa_neg(" + v + ")") : (sign > 0 ? "fa_add(" : "fa_sub(") + c + ", " + v + ")";
    }
    const std::string row = fe.row_offset(*g.load, slot);
    out << "    c = " << (c.empty() ? "0" : c) << ";\n";
    out << "    n = (int)" << fe.buf_size(slot, last) << ";\n";
    out << "    return (const float*)p.buf[" << slot << "] + (" << row << ");\n  }\n\n";
    gen.rel_gather = g.sign;
  }
  // Only variants of the rel-diag shape that the affine form (2 FFMA per entry) does not take get the block, the
  // gather shape included (the forward's source generator picks one of the two): the kernels test for V::kRelDiag
  // (fwd_rel_diag_sm90.cuh RelDiagOf).
  if (const Node* d = rel_diag_term(score_mod); d != nullptr && !rel.coef) {
    out << "  // score_mod == score + rel_diag(p, b, h, q_idx, kv_idx), a function of q_idx - kv_idx: yes\n";
    out << "  static constexpr bool kRelDiag = true;\n";
    out << "  __device__ __forceinline__ static float rel_diag(" << kMaskSignature << ") {\n";
    FunctionEmitter fe(layout, out);
    const std::string r = fe.as(d, DType::F32);
    out << "    return " << r << ";\n  }\n\n";
    gen.rel_diag = true;
  }
  // Only variants of the softcap shape get the block (other sources stay as they were): the kernels test
  // for V::kSoftcap (fwd_softmax_sm90.cuh SoftcapOf).
  if (!score_mod.empty()) {
    std::ostringstream body;
    FunctionEmitter fe(layout, body);
    const FunctionEmitter::SoftcapParts sc = fe.softcap_parts(score_mod.get());
    if (!sc.u.empty()) {
      const bool approx = sc.tanh == Op::TanhApprox;
      out << "  // score_mod == u * " << (approx ? "tanh_approx" : "tanh")
          << "(score * k), u and k from softcap(p, u, k): yes\n";
      out << "  static constexpr bool kSoftcap = true;\n";
      if (approx) out << "  static constexpr bool kSoftcapApprox = true;\n";
      gen.softcap = true;
      gen.softcap_approx = approx;
      out << "  __device__ __forceinline__ static void softcap(const ModParams& p, float& u, float& k) {\n"
          << body.str() << "    u = " << sc.u << ";\n    k = " << sc.k << ";\n  }\n\n";
    }
  }
  out << "  // g * d score_mod / d score\n";
  out << "  __device__ __forceinline__ static float score_grad(" << kSignature << ", float g) {\n";
  if (grad.d_score.empty()) {
    out << "    return g;\n";
  } else {
    FunctionEmitter fe(layout, out);
    const std::string r = fe.as(grad.d_score.get(), DType::F32);
    out << "    return g * " << r << ";\n";
  }
  out << "  }\n\n";

  out << "  // Accumulates g * d score_mod / d load into the gradient of every learnable buffer.\n";
  out << "  __device__ __forceinline__ static void buffer_grad(" << kSignature << ", float g) {\n";
  if (!grads.empty()) {
    FunctionEmitter fe(layout, out);
    for (const ir::LoadGrad& lg : grads) {
      const int slot = layout.buffer_slot(lg.load->name);
      const std::string d = fe.as(lg.derivative.get(), DType::F32);
      const auto at = fe.flat_index(*lg.load, slot);
      out << "    buffer_grad_accumulate(p, " << slot << ", (" << at.row << ")" << (at.col.empty() ? "" : " + " + at.col)
          << ", g * " << d << ");\n";
    }
  }
  out << "  }\n";
  gen.buffer_grad_reduce = buffer_grad_reduce(grads);
  if (gen.buffer_grad_reduce != 0) {
    // One gradient load whose index is the same along diagonals (or over the whole tile): the sm90
    // backward may sum the contributions first and add each sum once (kernels/sm90/bwd_buffer_grad_sm90.cuh).
    const ir::LoadGrad& lg = grads[0];
    const int slot = layout.buffer_slot(lg.load->name);
    out << "\n  // The gradient index depends on q_idx, kv_idx only through q_idx - kv_idx (2) or not at all (1):\n";
    out << "  // contributions may be summed along diagonals (over the tile) before buffer_grad_add.\n";
    out << "  static constexpr int kBufferGradReduce = " << gen.buffer_grad_reduce << ";\n";
    out << "  __device__ __forceinline__ static float buffer_grad_value(" << kSignature << ", float g) {\n";
    {
      FunctionEmitter fe(layout, out);
      const std::string d = fe.as(lg.derivative.get(), DType::F32);
      out << "    return g * " << d << ";\n";
    }
    out << "  }\n";
    out << "  __device__ __forceinline__ static void buffer_grad_add(" << kMaskSignature << ", float v) {\n";
    {
      FunctionEmitter fe(layout, out);
      const auto at = fe.flat_index(*lg.load, slot);
      out << "    buffer_grad_accumulate(p, " << slot << ", (" << at.row << ")" << (at.col.empty() ? "" : " + " + at.col)
          << ", v);\n";
    }
    out << "  }\n";
  }
  out << "};\n";
  gen.source = out.str();
  return gen;
}

}  // namespace flexattn::codegen
