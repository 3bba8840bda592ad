// Generated kernel sources, their in-process cache, and ModParams filling.
#include "runtime/kernel_set.h"

#include <algorithm>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>
#include <sstream>
#include <tuple>
#include <vector>

#include "common/params.h"
#include "flexattn/attention.h"
#include "flexattn/error.h"
#include "runtime/decode_source.h"
#include "runtime/sm90_backward.h"
#include "runtime/tma_sm90.h"
#include "sm80/tile_config.h"
#include "sm90/tile_config_sm90_bwd.h"

namespace flexattn::runtime {

const char* kernel_dtype(DType t) {
  if (t == DType::BF16) return "bf16";
  if (t == DType::F16) return "fp16";
  throw Error("dtype: the cuda backend takes bf16 or f16 tensors, got " + std::string(dtype_name(t)));
}

KernelSetKey dq_pass_key(const KernelSetKey& backward) {
  KernelSetKey k = backward;
  k.backward = true, k.dq_pass = true, k.family = KernelFamily::sm80;
  return k;
}

void launch_backward(const Variant& variant, const KernelSet& set, const kern::AttnParams& p,
                     const jit::LaunchConfig& main, bool deterministic, void* stream) {
  // Compiled (or found) before the first launch, so a compile error leaves no half-done backward behind.
  const KernelSet* dq_pass = deterministic ? &get_kernel_set(variant, dq_pass_key(set.key)) : nullptr;
  jit::LaunchConfig pre = launch_config(kern::sm80_bwd_preprocess_launch(p.B, p.Hq, p.L), stream);
  if (p.bwd_cta_order != nullptr) {
    // FLEXATTN_SM90_BWD_CTA_ORDER: the order's one CTA cost ~2 % of a sliding-window backward when it ran alone
    // (H100, session 35). So the preprocess, which does not read the order, is launched as the order kernel's
    // programmatic dependent and starts at once; one preprocess CTA waits for the order's grid
    // (attn_bwd_preprocess_sm80), so the preprocess's completion, which the main kernel's launch waits for,
    // includes the order's.
    jit::LaunchConfig c;
    c.grid = {1, 1, 1};
    c.block = {unsigned(kern::kSm90BwdOrderThreads), 1, 1};
    c.stream = static_cast<jit::CUstream>(stream);
    jit::launch(jit::get_function(set.compiled, "flexattn_bwd_cta_order"), c, p);
    pre.programmatic = true;
  }
  jit::launch(jit::get_function(set.aux, "flexattn_bwd_preprocess"), pre, p);
  jit::launch(jit::get_function(set.compiled, "flexattn_bwd"), main, p);
  if (dq_pass)
    jit::launch(jit::get_function(dq_pass->compiled, "flexattn_bwd_dq"),
                launch_config(kern::sm80_bwd_dq_launch(p.D, p.Dv, p.B, p.Hq, p.L), stream), p);
  else
    jit::launch(jit::get_function(set.aux, "flexattn_bwd_dq_convert"),
                launch_config(kern::sm80_bwd_dq_convert_launch(p.B, p.Hq, p.L), stream), p);
}

void add_to_report(CompileReport& r, const jit::CompiledKernel& c) {
  for (const auto& [name, info] : c.ptxas) {
    r.registers[name] = info.registers;
    r.spill_bytes[name] = info.spill_stores + info.spill_loads;
  }
}

CompileReport compile_report(const KernelSet& set) {
  CompileReport r;
  r.key = set.compiled.key;
  add_to_report(r, set.compiled);
  add_to_report(r, set.aux);
  return r;
}

std::vector<std::string> jit_compile_options() {
  const char* level = std::getenv("FLEXATTN_JIT_FAST_COMPILE");
  if (level == nullptr || *level == 0 || std::string(level) == "0") return {};
  const std::string l = level;
  if (l != "min" && l != "mid" && l != "max")
    throw Error("FLEXATTN_JIT_FAST_COMPILE: expected 0, min, mid or max, got '" + l + "'");
  return {"--Ofast-compile=" + l};
}

namespace {

std::string entry(const char* name, const std::string& bounds, const std::string& body) {
  // minBlocksPerSM = 1: without it ptxas caps these kernels' registers low enough to spill.
  return "extern \"C\" __global__ void __launch_bounds__(" + bounds + ", 1)\n" + name +
         "(const __grid_constant__ AttnParams p) { " + body + "; }\n";
}

}  // namespace

std::string kernel_source(const codegen::GeneratedVariant& variant, const KernelSetKey& key) {
  const std::string t = kernel_dtype(key.dtype);
  const std::string dd = std::to_string(key.d) + ", " + std::to_string(key.dv);
  std::ostringstream s;
  s << "// flexattn " << (key.dq_pass ? "deterministic dQ pass" : key.backward ? "backward" : "forward")
    << " kernels, sm80 family, " << t << ", D=" << key.d << ", Dv=" << key.dv << "\n";
  s << "#include \"common/mod_ops.cuh\"\n";
  s << (key.backward ? "#include \"sm80/attn_bwd_sm80.cuh\"\n" : "#include \"sm80/attn_fwd_sm80.cuh\"\n");
  s << "using namespace flexattn::kern;\n\n";
  s << variant.source << "\n";
  if (!key.backward) {
    s << entry("flexattn_fwd", "sm80_fwd_threads(" + dd + ")", "attn_fwd_sm80<FlexVariant, " + t + ", " + dd + ">(p)");
  } else if (key.dq_pass) {
    s << entry("flexattn_bwd_dq", "sm80_bwd_dq_threads(" + dd + ")",
               "attn_bwd_dq_sm80<FlexVariant, " + t + ", " + dd + ">(p)");
  } else {  // the preprocess and the dQ convert: kernel_source_bwd_aux
    s << entry("flexattn_bwd", "sm80_bwd_threads(" + dd + ")", "attn_bwd_sm80<FlexVariant, " + t + ", " + dd + ">(p)");
  }
  return s.str();
}

std::string kernel_source_bwd_aux(const KernelSetKey& key) {
  const std::string t = kernel_dtype(key.dtype);
  std::ostringstream s;
  s << "// flexattn backward's preprocess and dQ convert (every variant, both families), " << t << ", D=" << key.d
    << ", Dv=" << key.dv << "\n";
  s << "#include \"sm80/attn_bwd_sm80.cuh\"\n";
  s << "using namespace flexattn::kern;\n\n";
  s << entry("flexattn_bwd_preprocess", "sm80_aux_threads()",
             "attn_bwd_preprocess_sm80<" + t + ", " + std::to_string(key.d) + ", " + std::to_string(key.dv) + ">(p)");
  s << entry("flexattn_bwd_dq_convert", "sm80_aux_threads()",
             "attn_bwd_dq_convert_sm80<" + t + ", " + std::to_string(key.d) + ">(p)");
  return s.str();
}

void check_backward_head_dims(int64_t d, int64_t dv) {
  if (kern::sm80_bwd_head_dims_ok(int(d), int(dv))) return;
  const HeadDims p = cuda_padded_head_dims(int(d), int(dv));
  throw Error("head dims: the cuda backward takes multiples of 32 up to 128 or of 64 above, got D=" +
              std::to_string(d) + ", Dv=" + std::to_string(dv) + "; zero-pad q and k to D=" + std::to_string(p.d) +
              " and v to Dv=" + std::to_string(p.dv) + " (cuda_padded_head_dims; the result is unchanged)");
}

namespace {

// ptxas spilled (or gave the entry a stack frame) in `entry` of the compiled set.
bool spills_in(const jit::CompiledKernel& compiled, const std::string& entry) {
  const auto it = compiled.ptxas.find(entry);
  return it != compiled.ptxas.end() && (it->second.spill_stores + it->second.spill_loads > 0 || it->second.stack > 0);
}

}  // namespace

const KernelSet& get_kernel_set(const Variant& variant, const KernelSetKey& key) {
  using CacheKey = std::tuple<const ir::Node*, const ir::Node*, std::vector<std::string>, DType, int, int,
                              std::string, bool, KernelFamily, bool, int, int, bool>;
  struct Entry {
    Variant keep_alive;  // holds the nodes whose addresses are in the key
    std::unique_ptr<KernelSet> set;
  };
  static std::mutex mu;
  static std::map<CacheKey, Entry>* cache = new std::map<CacheKey, Entry>();
  const CacheKey ck{variant.score_mod.get(), variant.mask_mod.get(), variant.grad_buffers, key.dtype, key.d,
                    key.dv, key.arch, key.backward, key.family, key.dq_pass, key.sm90_bwd_persistent,
                    key.sm90_bwd_grid_order, key.sm90_fwd_tall};
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache->find(ck);
    if (it != cache->end()) return *it->second.set;
  }
  if (key.d % 16 != 0 || key.dv % 16 != 0 || key.d < 16 || key.dv < 16 || key.d > 256 || key.dv > 256)
    throw Error("head dims: the cuda backend takes head dims that are multiples of 16 up to 256, got D=" +
                std::to_string(key.d) + ", Dv=" + std::to_string(key.dv));
  if (key.backward) check_backward_head_dims(key.d, key.dv);
  codegen::GeneratedVariant gen = codegen::emit_cuda_variant(variant, key.backward);
  auto set = std::make_unique<KernelSet>();
  set->key = key;
  set->layout = gen.layout;
  jit::KernelRequest req;
  const bool sm90 = key.family == KernelFamily::sm90;
  if (sm90 && key.arch != "sm_90a")
    throw Error("arch: the sm90 kernel family compiles only for sm_90a, got '" + key.arch + "'");
  const bool decode = key.family == KernelFamily::decode;
  if (decode && key.backward) throw Error("the decode kernel family is forward only");
  if (key.dq_pass && (!key.backward || key.family != KernelFamily::sm80))
    throw Error("the deterministic dQ pass is a backward kernel of the sm80 family");
  req.prefix = std::string("attn_") + (decode ? "decode" : key.dq_pass ? "bwddq" : key.backward ? "bwd" : "fwd") +
               (sm90 ? "_sm90a_" : decode ? "_" : "_sm80_") + kernel_dtype(key.dtype) + "_d" + std::to_string(key.d) +
               "_dv" + std::to_string(key.dv);
  const bool sm90_fwd = sm90 && !key.backward;
  if (sm90_fwd) set->sm90_fwd = sm90_fwd_form(gen, key);  // the switches read once: source and launch follow it
  req.source = sm90_fwd ? kernel_source_sm90_fwd(gen, key, set->sm90_fwd)
               : sm90   ? kernel_source_sm90(gen, key)
               : decode ? kernel_source_decode(gen, key)
                        : kernel_source(gen, key);
  req.arch = key.arch;
  req.options = jit_compile_options();
  if (decode)
    req.kernel_names = decode_kernel_names(key.d, key.dv, decode_tma_source(key.arch, decode_tuning(), key.d, key.dv));
  else if (key.backward)
    req.kernel_names = {key.dq_pass ? "flexattn_bwd_dq" : "flexattn_bwd"};
  else
    req.kernel_names = {"flexattn_fwd"};
  // A backward set's preprocess and dQ convert: their own program, the same for every variant of (dtype, D, Dv,
  // arch), so only the first variant compiles it (~0.1 s of each backward compile before, session 26), on a thread
  // beside its main kernel; later ones find it in the JIT's caches. On every path out of this function the future's
  // destructor joins that thread (std::async's shared state).
  std::future<jit::CompiledKernel> aux;
  jit::KernelRequest aux_req;
  if (key.backward && !key.dq_pass) {
    aux_req.prefix = "attn_bwdaux_" + std::string(kernel_dtype(key.dtype)) + "_d" + std::to_string(key.d) + "_dv" +
                     std::to_string(key.dv);
    aux_req.source = kernel_source_bwd_aux(key);
    aux_req.arch = key.arch;
    aux_req.options = req.options;
    aux_req.kernel_names = {"flexattn_bwd_preprocess", "flexattn_bwd_dq_convert"};
    try {
      aux = std::async(std::launch::async, [aux_req] { return jit::get_or_compile(aux_req); });
    } catch (const std::system_error&) {  // no thread to spare: compiled after the main kernel
    }
  }
  if (!(sm90 && key.backward)) {
    set->compiled = jit::get_or_compile(req);
    // A forward form's optional parts, given up one at a time while its kernel spills: the tall tile (160-register
    // consumers: the heavier mods spill there, ptxas 13.0, D = 64: softcap + causal 200 bytes, document, relbias +
    // causal, t5, text:mixed), then the rel-gather prefetch (sm90_fwd_form keeps it off where it is known to spill).
    for (bool* part : {&set->sm90_fwd.tall, &set->sm90_fwd.rel_prefetch}) {
      if (!*part || !spills_in(set->compiled, "flexattn_fwd")) continue;
      *part = false;
      req.source = kernel_source_sm90_fwd(gen, key, set->sm90_fwd);
      set->compiled = jit::get_or_compile(req);
    }
  } else {
    // The first source whose main kernel compiles without spills (sm90_bwd_fallback_sources: what each step gives
    // up and why). Of the corpus at D = 128 (NVRTC 13.0) only a learnable relative bias (per-diagonal buffer-gradient
    // sums) with a mask_mod spills with the first source: with causal it takes the second, with a document or
    // sliding-window mask the third (locally 5.2 / 12.5 / 10.1 s one compile after another; one step later each since
    // the rank warp goes first). There the next candidates compile on threads beside the first, so that a cold first
    // call waits for the longest of them instead of their sum (always for all: the call returns after the speculative
    // compiles, also when the walk ends earlier). A candidate the walk does not reach is compiled for nothing (and cached); a failed one is
    // reported by the walk when it reaches it (the JIT hands a concurrent request the same error). Without a thread
    // to spare (std::system_error) the walk compiles alone, as before.
    const std::vector<std::string> path = sm90_bwd_fallback_sources(gen, key, req.source);
    const bool likely_spills =
        gen.buffer_grad_reduce == 2 && gen.has_mask_mod && sm90_bwd_v2_selected(key.d, key.dv);
    // (Three with the rank warp in the first source: giving it up is the first step, session 33, and it does not
    // cure these consumers' spill.)
    const size_t want = sm90_bwd_source_choice(path.front()).rank_warp ? 3 : 2;
    const size_t ahead = likely_spills ? std::min<size_t>(want, path.size() - 1) : 0;
    std::vector<std::future<void>> speculative;
    for (size_t i = 1; i <= ahead; ++i) {
      jit::KernelRequest r = req;
      r.source = path[i];
      try {
        speculative.push_back(std::async(std::launch::async, [r] {
          try {
            jit::get_or_compile(r);
          } catch (...) {
          }
        }));
      } catch (const std::system_error&) {
        break;
      }
    }
    for (size_t i = 0; i < path.size(); ++i) {
      req.source = path[i];
      set->compiled = jit::get_or_compile(req);
      if (!spills_in(set->compiled, "flexattn_bwd")) break;
    }
    // What the launch needs to know (shared memory, grid, dQ maps) follows the source the set ended with.
    const Sm90BwdChoice final_choice = sm90_bwd_source_choice(req.source);
    set->sm90_dq_bulk = final_choice.dq_bulk;
    set->sm90_bwd_v2 = final_choice.v2;
    set->sm90_bwd_dq_tma = final_choice.dq_tma;
    set->sm90_bwd_persistent = final_choice.persistent;
    set->sm90_bwd_grid_order = final_choice.grid_order;
    set->sm90_bwd_tma_store = final_choice.tma_store;
  }
  if (key.backward && !key.dq_pass) set->aux = aux.valid() ? aux.get() : jit::get_or_compile(aux_req);
  std::lock_guard<std::mutex> lock(mu);
  auto [it, inserted] = cache->emplace(ck, Entry{variant, std::move(set)});
  return *it->second.set;
}

void fill_mod_params(const codegen::VariantLayout& layout, const DeviceBindings& bindings, bool backward,
                     kern::ModParams* out) {
  *out = kern::ModParams{};
  const std::vector<double> lits = layout.literal_values();
  for (size_t i = 0; i < lits.size(); ++i) out->lit[i] = lits[i];
  for (size_t i = 0; i < layout.scalars.size(); ++i) {
    auto it = bindings.scalars.find(layout.scalars[i]);
    if (it == bindings.scalars.end())
      throw Error("scalar '" + layout.scalars[i] + "' is used by the mod but no value was given");
    out->scalar[i] = it->second;
  }
  for (size_t i = 0; i < layout.buffers.size(); ++i) {
    const ir::BufferUse& use = layout.buffers[i];
    auto it = bindings.buffers.find(use.name);
    if (it == bindings.buffers.end() || it->second.data == nullptr)
      throw Error("buffer '" + use.name + "' is used by the mod but was not given");
    const ir::BufferView& view = it->second;
    if (int(view.shape.size()) != use.rank)
      throw Error("buffer '" + use.name + "' has " + std::to_string(view.shape.size()) +
                  " dimensions but the mod indexes it with " + std::to_string(use.rank));
    if (view.dtype != use.dtype)
      throw Error("buffer '" + use.name + "' holds " + std::string(dtype_name(view.dtype)) + " but the kernel reads " +
                  std::string(dtype_name(use.dtype)));
    out->buf[i] = view.data;
    for (int d = 0; d < kern::kModBufRank; ++d) out->buf_shape[i][d] = d < use.rank ? view.shape[d] : 1;
    for (int d = 0; d < use.rank; ++d) {
      if (view.shape[d] < 1) throw Error("buffer '" + use.name + "' has an empty dimension");
      // Generated gathers clamp i32 indices in 32-bit arithmetic (fa_clamp_index32, mod_ops.cuh).
      if (view.shape[d] > 0x7fffffffLL)
        throw Error("buffer '" + use.name + "' has a dimension of " + std::to_string(view.shape[d]) +
                    " elements; the cuda kernels take at most 2^31 - 1 per dimension");
    }
    // After the checks: four dimensions below 2^31 can still pass 2^63 (only fabricated views: a real buffer's
    // element count fits its allocation), so the product is taken unsigned.
    unsigned long long numel = 1;
    for (int d = 0; d < use.rank; ++d) numel *= (unsigned long long)view.shape[d];
    out->buf_numel[i] = (long long)numel;
  }
  if (backward) {
    for (const std::string& g : layout.grad_buffers) {
      auto it = bindings.buffer_grads.find(g);
      if (it == bindings.buffer_grads.end() || it->second == nullptr)
        throw Error("buffer '" + g + "' asks for a gradient but no gradient accumulator was given");
      out->buf_grad[layout.buffer_slot(g)] = it->second;
    }
  }
}

}  // namespace flexattn::runtime
