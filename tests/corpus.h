#pragma once
// The one mod corpus shared by the compile tier, the GPU tier and the benchmarks: registry specs
// (include/flexattn/mods.h) or text mods ("expr:" prefix), instantiated for a problem shape with
// their buffers and scalars.
#include <memory>
#include <string>
#include <vector>

#include "flexattn/ir_text.h"
#include "flexattn/mods.h"
#include "flexattn/variant.h"

namespace flexattn::corpus {

struct CorpusEntry {
  std::string name, mask, score;  // "" = none
  bool learnable = false;         // ask for the gradient of the mod's trainable buffers
  // The largest absolute score error the GPU's approximate instructions may add to the reference's scores
  // (tanh_approx: cap * 2^-11, tanh.approx.f32's relative error bound); the GPU checks widen their tolerances
  // by it. 0: the mods are as exact as the kernels' usual arithmetic.
  double score_err = 0;
};

inline const std::vector<CorpusEntry>& mod_corpus() {
  static const std::vector<CorpusEntry> corpus = {
      {"full", "", ""},
      {"causal", "causal", ""},
      {"sliding_window:100", "sliding_window:100", ""},
      {"prefix_lm:70", "prefix_lm:70", ""},
      {"document:3", "document:3", ""},
      {"chunked:64", "chunked:64", ""},
      {"dilated:3", "dilated:3", ""},
      {"softcap:30+causal", "causal", "softcap:30"},
      {"alibi+causal", "causal", "alibi"},
      {"relbias(learnable)", "", "relbias", true},
      {"relbias+causal", "causal", "relbias:const"},
      {"alibi_slopes(learnable)+causal", "causal", "alibi_slopes", true},
      {"t5", "", "t5"},
      {"text:mixed", "expr:q_idx >= kv_idx", "expr:where(score > 0, score * 0.5, score) + 1.0 / (abs(score) + 1.0)"},
      // Last, so that the entries above keep their positions (gpu_attention_check picks some by index).
      {"softcap_approx:30+causal", "causal", "softcap_approx:30", false, 30.0 / 2048},
      // Integer bitwise nodes (natten's morton codes, bit-packed masks): bands of 64 rows by their bits, or a residue.
      {"text:bitwise",
       "expr:bitwise_and(bitwise_right_shift(q_idx, 6), 3) == bitwise_and(bitwise_right_shift(kv_idx, 6), 3) or "
       "bitwise_or(q_idx, bitwise_left_shift(kv_idx, 1)) % 5 == 0",
       ""},
      // gelu of the score as torch computes it (erf on the GPU), the activation of attention-gym's activation mod.
      // (Its log(gelu(score) + offset) spills 32 bytes in the sm90 backward's per-element-dQ kernel, which
      // get_kernel_set walks past; no tan: CUDA's tanf inlines its large-argument reduction per entry, a 14 s compile.)
      {"text:gelu", "", "expr:score * 0.5 * (1.0 + erf(score * 0.7071067811865476))"},
      // ALiBi alone: no mask_mod, so no block mask, and with D = Dv = 64 the only ALiBi on the sm90 forward's tall
      // tile (its affine bias with three consumer warpgroups; session 27: never run on a GPU before).
      {"alibi", "", "alibi"},
      // Tensor.detach(): values flow, gradients stop (the backward's dS is half the forward's slope here).
      {"text:detach", "", "expr:score * 0.5 + detach(score) * 0.5 + detach(score * score) * 0.125"},
  };
  return corpus;
}

inline const CorpusEntry& corpus_entry(const std::string& name) {
  for (const CorpusEntry& e : mod_corpus())
    if (e.name == name) return e;
  throw Error("no corpus entry '" + name + "'");
}

// A corpus entry bound to a problem: the variant, its runtime values, and the tensors behind them.
struct BuiltVariant {
  Variant variant;
  ModBindings bindings;
  std::vector<std::unique_ptr<HostTensor>> storage;
};

inline BuiltVariant build_variant(const CorpusEntry& c, const mods::ProblemShape& shape) {
  BuiltVariant b;
  auto add_spec = [&](const mods::ModSpec& spec) {
    for (const auto& bs : spec.buffers) {
      b.storage.push_back(std::make_unique<HostTensor>(bs.make(shape)));
      const HostTensor& t = *b.storage.back();
      b.bindings.buffers[bs.name] = ir::BufferView{t.dtype, t.shape, t.data()};
      if (bs.trainable && c.learnable) b.variant.grad_buffers.push_back(bs.name);
    }
    for (const auto& ss : spec.scalars) b.bindings.scalars[ss.name] = ss.value(shape);
  };
  if (c.mask.rfind("expr:", 0) == 0) {
    b.variant.mask_mod = ir::parse(c.mask.substr(5));
  } else if (!c.mask.empty()) {
    mods::ModSpec m = mods::lookup_mask(c.mask);
    b.variant.mask_mod = m.expr;
    add_spec(m);
  }
  if (c.score.rfind("expr:", 0) == 0) {
    b.variant.score_mod = ir::parse(c.score.substr(5));
  } else if (!c.score.empty()) {
    mods::ModSpec s = mods::lookup_score(c.score);
    b.variant.score_mod = s.expr;
    add_spec(s);
  }
  return b;
}

}  // namespace flexattn::corpus
