// Slot assignment for literals, scalars and buffers: a pure function of the DAG structure, so two
// variants that differ only in literal values get the same layout and the same kernel source.
#include <algorithm>
#include <map>
#include <set>

#include "flexattn/codegen.h"
#include "flexattn/error.h"

namespace flexattn::codegen {

int VariantLayout::buffer_slot(const std::string& name) const {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].name == name) return int(i);
  return -1;
}

int VariantLayout::scalar_slot(const std::string& name) const {
  for (size_t i = 0; i < scalars.size(); ++i)
    if (scalars[i] == name) return int(i);
  return -1;
}

std::vector<double> VariantLayout::literal_values() const {
  std::vector<double> v;
  for (const ir::Expr& e : literals) v.push_back(e->value);
  return v;
}

VariantLayout make_layout(const std::vector<ir::Expr>& roots, const std::vector<std::string>& grad_buffers) {
  VariantLayout layout;
  std::set<const ir::Node*> seen_literals;
  std::set<std::string> scalars;
  std::map<std::string, ir::BufferUse> buffers;
  for (const ir::Expr& root : roots) {
    for (const ir::Node* n : ir::topo_order(root)) {
      if (n->op == ir::Op::Literal && seen_literals.insert(n).second) {
        // Re-wrap the node in an owning handle: nodes are hash-consed, so make_node returns it.
        layout.literals.push_back(ir::make_node(ir::Op::Literal, n->type, n->weak, {}, n->value));
      } else if (n->op == ir::Op::Scalar) {
        scalars.insert(n->name);
      } else if (n->op == ir::Op::Load) {
        auto [it, inserted] = buffers.emplace(n->name, ir::BufferUse{n->name, n->buffer_dtype, int(n->args.size())});
        if (!inserted && (it->second.dtype != n->buffer_dtype || it->second.rank != int(n->args.size())))
          throw Error("buffer '" + n->name + "' is used with two different dtypes or ranks");
      }
    }
  }
  layout.scalars.assign(scalars.begin(), scalars.end());
  for (auto& [name, use] : buffers) layout.buffers.push_back(use);
  for (const std::string& g : grad_buffers)
    if (layout.buffer_slot(g) >= 0) layout.grad_buffers.push_back(g);
  if (int(layout.literals.size()) > kMaxLiterals)
    throw Error("the mods use " + std::to_string(layout.literals.size()) + " literals; at most " +
                std::to_string(kMaxLiterals) + " are supported");
  if (int(layout.scalars.size()) > kMaxScalars)
    throw Error("the mods use " + std::to_string(layout.scalars.size()) + " named scalars; at most " +
                std::to_string(kMaxScalars) + " are supported");
  if (int(layout.buffers.size()) > kMaxBuffers)
    throw Error("the mods use " + std::to_string(layout.buffers.size()) + " captured buffers; at most " +
                std::to_string(kMaxBuffers) + " are supported");
  return layout;
}

}  // namespace flexattn::codegen
