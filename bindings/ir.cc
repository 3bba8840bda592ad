// The IR handles: Mod (parsed + verified text) and Variant (score_mod, mask_mod, learnable buffers).
#include <algorithm>

#include "convert.h"
#include "flexattn/error.h"
#include "flexattn/ir_passes.h"
#include "flexattn/ir_text.h"

namespace flexattn::py {

namespace {

std::map<std::string, DType> dtype_map(const std::map<std::string, std::string>& names, const std::string& what) {
  std::map<std::string, DType> out;
  for (const auto& [name, t] : names) out[name] = parse_dtype_arg(t, what + "['" + name + "']");
  return out;
}

Mod make_mod(const std::string& text, const std::string& kind, const std::map<std::string, std::string>& buffer_dtypes,
             const std::map<std::string, std::string>& scalar_types) {
  check(kind == "score_mod" || kind == "mask_mod", "kind: expected 'score_mod' or 'mask_mod', got '" + kind + "'");
  ir::ParseOptions opt;
  opt.buffer_dtypes = dtype_map(buffer_dtypes, "buffer_dtypes");
  opt.scalar_types = dtype_map(scalar_types, "scalar_types");
  Mod m{ir::parse(text, opt), kind};
  if (kind == "score_mod")
    ir::verify_score_mod(m.expr);
  else
    ir::verify_mask_mod(m.expr);
  return m;
}

nb::list buffer_list(const ir::Expr& e) {
  nb::list out;
  for (const ir::BufferUse& u : ir::buffers(e))
    out.append(nb::make_tuple(u.name, std::string(dtype_name(u.dtype)), u.rank));
  return out;
}

bool reads_buffer(const ir::Expr& e, const std::string& name) {
  if (e.empty()) return false;
  for (const ir::BufferUse& u : ir::buffers(e))
    if (u.name == name) return true;
  return false;
}

VariantHandle make_variant(const std::optional<Mod>& score_mod, const std::optional<Mod>& mask_mod,
                           const std::vector<std::string>& grad_buffers) {
  check(!score_mod || score_mod->kind == "score_mod", "score_mod: got a mask_mod");
  check(!mask_mod || mask_mod->kind == "mask_mod", "mask_mod: got a score_mod");
  VariantHandle v;
  if (score_mod) v.variant.score_mod = score_mod->expr;
  if (mask_mod) v.variant.mask_mod = mask_mod->expr;
  for (const std::string& g : grad_buffers) {
    check(std::count(grad_buffers.begin(), grad_buffers.end(), g) == 1, "grad_buffers: '" + g + "' is listed twice");
    bool float_read = false;
    if (!v.variant.score_mod.empty())
      for (const ir::BufferUse& u : ir::buffers(v.variant.score_mod))
        float_read |= u.name == g && is_float(u.dtype);
    check(float_read, "grad_buffers: '" + g + "' is not a floating-point buffer read by the score_mod");
    // torch asserts the same: a mask_mod's captured buffers may not require grad.
    check(!reads_buffer(v.variant.mask_mod, g), "grad_buffers: '" + g + "' is read by the mask_mod, whose buffers "
                                                "cannot have gradients");
  }
  v.variant.grad_buffers = grad_buffers;
  return v;
}

// The same mod with scalars and buffers renamed (names not in `names` are kept): lets the Python side
// give a score_mod and a mask_mod that captured different values under one name distinct names.
Mod renamed(const Mod& m, const std::map<std::string, std::string>& names) {
  std::map<const ir::Node*, ir::Expr> done;
  for (const ir::Node* n : ir::topo_order(m.expr)) {
    std::vector<ir::Expr> args;
    for (const ir::NodePtr& a : n->args) args.push_back(done.at(a.get()));
    std::string name = n->name;
    if (n->op == ir::Op::Scalar || n->op == ir::Op::Load) {
      auto it = names.find(name);
      if (it != names.end()) {
        check(!it->second.empty(), "names['" + name + "']: the new name is empty");
        name = it->second;
      }
    }
    done[n] = ir::make_node(n->op, n->type, n->weak, std::move(args), n->value, name, n->buffer_dtype);
  }
  return Mod{done.at(m.expr.get()), m.kind};
}

std::string variant_key(const VariantHandle& v) {
  const Variant& x = v.variant;
  std::string key = "score:" + (x.score_mod.empty() ? std::string("-") : ir::structural_key(x.score_mod));
  key += "|mask:" + (x.mask_mod.empty() ? std::string("-") : ir::structural_key(x.mask_mod));
  key += "|grad:";
  for (const std::string& g : x.grad_buffers) key += g + ",";
  return key;
}

}  // namespace

void bind_ir(nb::module_& m) {
  nb::class_<Mod>(m, "Mod", "A score_mod or mask_mod in IR text form, parsed and type-checked.")
      .def(nb::new_([](const std::string& text, const std::string& kind,
                       const std::map<std::string, std::string>& buffer_dtypes,
                       const std::map<std::string, std::string>& scalar_types) {
             return make_mod(text, kind, buffer_dtypes, scalar_types);
           }),
           nb::arg("text"), nb::arg("kind"), nb::arg("buffer_dtypes") = std::map<std::string, std::string>{},
           nb::arg("scalar_types") = std::map<std::string, std::string>{},
           "Parses `text` (docs/ir_text.md); kind is 'score_mod' or 'mask_mod'. buffer_dtypes / scalar_types give "
           "the element type of each buffer and the type of each scalar ('f32', 'bf16', 'i32', ...; default f32). "
           "Raises flexattn._C.Error for malformed text or a mod of the wrong type.")
      .def_prop_ro("kind", [](const Mod& m) { return m.kind; })
      .def_prop_ro("text", [](const Mod& m) { return ir::print(m.expr); }, "The canonical text (print(parse(t))).")
      .def_prop_ro("structural_key", [](const Mod& m) { return ir::structural_key(m.expr); },
                   "Canonical form without literal values: equal keys <=> the same compiled kernel.")
      .def_prop_ro("structural_hash", [](const Mod& m) { return ir::structural_hash(m.expr); })
      .def_prop_ro("scalar_names", [](const Mod& m) { return ir::scalar_names(m.expr); })
      .def_prop_ro("buffers", [](const Mod& m) { return buffer_list(m.expr); },
                   "[(name, dtype, rank)] of the buffers the mod reads, sorted by name.")
      .def("renamed", &renamed, nb::arg("names"),
           "A copy with scalars and buffers renamed by `names` ({old: new}); other names are kept.")
      .def_prop_ro("reads_score", [](const Mod& m) { return ir::depends_on(m.expr, ir::Op::Score); })
      .def("__eq__", [](const Mod& a, const Mod& b) { return a.expr.get() == b.expr.get() && a.kind == b.kind; })
      .def("__hash__", [](const Mod& m) { return ir::structural_hash(m.expr); })
      .def("__repr__", [](const Mod& m) { return "Mod(" + m.kind + ": " + ir::print(m.expr) + ")"; });

  nb::class_<VariantHandle>(m, "Variant", "score_mod + mask_mod + the buffers whose gradient is wanted.")
      .def(nb::new_(&make_variant), nb::arg("score_mod").none(), nb::arg("mask_mod").none(),
           nb::arg("grad_buffers") = std::vector<std::string>{},
           "None stands for the identity score_mod / the attend-everywhere mask_mod. grad_buffers must be "
           "floating-point buffers read by the score_mod and not by the mask_mod.")
      .def_prop_ro("grad_buffers", [](const VariantHandle& v) { return v.variant.grad_buffers; })
      .def_prop_ro("key", &variant_key, "Structural key of the whole variant (literal values excluded).")
      .def("__repr__", [](const VariantHandle& v) {
        const Variant& x = v.variant;
        return "Variant(score_mod=" + (x.score_mod.empty() ? std::string("None") : ir::print(x.score_mod)) +
               ", mask_mod=" + (x.mask_mod.empty() ? std::string("None") : ir::print(x.mask_mod)) + ")";
      });
}

}  // namespace flexattn::py
