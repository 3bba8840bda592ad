#pragma once
// A compiled set of attention kernels for one (variant structure, dtype, head dims, arch, direction),
// and the ModParams filling that goes with it.
#include <string>
#include <vector>

#include "flexattn/attention.h"
#include "flexattn/codegen.h"
#include "flexattn/jit.h"
#include "jit/module.h"

namespace flexattn::kern {
struct ModParams;
struct AttnParams;
}

namespace flexattn::runtime {

// sm80: the portable mma.sync family (the default everywhere); sm90: the Hopper forward (wgmma + TMA,
// sm_90a only, opt-in through FLEXATTN_SM90 until checked on a GPU: runtime/tma_sm90.h).
// decode: short queries, split-KV, paged K/V (kernels/decode, sm_80+, forward only; runtime/decode_source.h).
enum class KernelFamily { sm80, sm90, decode };

struct KernelSetKey {
  DType dtype = DType::BF16;
  int d = 0, dv = 0;
  std::string arch;
  bool backward = false;
  KernelFamily family = KernelFamily::sm80;
  // Backward only: the deterministic mode's dQ pass alone (flexattn_bwd_dq, an sm80-family kernel that every
  // family's deterministic backward runs after its main kernel). A set of its own, compiled at the first
  // deterministic call: in the backward set it took 25-35 % of every backward compile (ptxas 0.3-0.8 s of
  // 1.3-2.4 s, sm_90a, corpus variants) for a mode few calls use.
  bool dq_pass = false;
  // sm90 backward only: 1 / 0 the persistent main kernel or the default one (FLEXATTN_SM90_BWD_PERSISTENT=auto
  // picks per call, sm90_bwd_persistent_for_call); -1: the switch as read when the set is built.
  int sm90_bwd_persistent = -1;
  // sm90 backward only: 1 / 0 the grouped launch order compiled in or not; -1: FLEXATTN_SM90_BWD_HEAD_GROUPS's rule
  // (auto: variants with a mask_mod). Deterministic calls of variants without one ask for 1 under auto
  // (sm90_bwd_grid_order_for_call).
  int sm90_bwd_grid_order = -1;
  // sm90 forward only: ask for the tall tile (three consumer warpgroups, kernels/sm90/tile_config_sm90.h); the set
  // has it where sm90_fwd_tall_ok and it compiles without spills (KernelSet::sm90_fwd), else the usual kernel. The forward asks per call
  // (FLEXATTN_SM90_FWD_TALL, D = Dv = 64, no block mask: runtime/attention_cuda.cc).
  bool sm90_fwd_tall = false;
};

// The sm90 forward kernel a set holds, as its source was generated: the narrow kv tile (FLEXATTN_SM90_NARROW), the
// persistent form (FLEXATTN_SM90_PERSISTENT) and the tall tile (asked for by KernelSetKey::sm90_fwd_tall, where it
// applies and compiles without spills). The switches are read once, by sm90_fwd_form (runtime/tma_sm90.h); the source
// and the launch both follow this, so a switch flipped after the set was built cannot launch a kernel with the other
// kernel's TMA boxes, grid or shared memory (byte counts that never complete: a hang).
struct Sm90FwdForm {
  bool narrow = false, persistent = false, tall = false;
  bool rel_diag = false;  // distance tables (FLEXATTN_SM90_REL_DIAG): their source's define and their shared memory
  bool rel_prefetch = false;  // the rel-gather loads issued while S is computed (FLEXATTN_SM90_GATHER_PREFETCH)
};

struct KernelSet {
  jit::CompiledKernel compiled;
  // Backward sets (not the deterministic dQ pass): flexattn_bwd_preprocess and flexattn_bwd_dq_convert, compiled from
  // kernel_source_bwd_aux (one program per dtype, head dims and arch, shared by every variant and both families).
  jit::CompiledKernel aux;
  codegen::VariantLayout layout;
  KernelSetKey key;
  // sm90 backward only: the main kernel takes the bulk dQ path (its shared-memory request is larger).
  bool sm90_dq_bulk = false;
  // sm90 backward only: the main kernel is the v2 one (FLEXATTN_SM90_BWD_V2; its own shared-memory layout).
  bool sm90_bwd_v2 = false;
  // sm90 backward only: the v2 main kernel adds dQ with TMA tensor reductions (FLEXATTN_SM90_BWD_V3; needs
  // p.dq_map).
  bool sm90_bwd_dq_tma = false;
  // sm90 backward only: the main kernel is the persistent one (FLEXATTN_SM90_BWD_PERSISTENT; its grid is
  // one CTA per SM and its shared memory 32 bytes larger).
  bool sm90_bwd_persistent = false;
  // sm90 backward only: the main kernel has the grouped launch order (FLEXATTN_SM90_BWD_HEAD_GROUPS) compiled in,
  // so p.bwd_head_group > 1 takes effect.
  bool sm90_bwd_grid_order = false;
  // sm90 backward only: the TMA-store epilogue (FLEXATTN_SM90_BWD_TMA_STORE) is compiled in, so p.dkv_tma takes it.
  bool sm90_bwd_tma_store = false;
  // sm90 forward only: the kernel's tile and form (the tall one: 512 threads, 192-row tiles, its own layout).
  Sm90FwdForm sm90_fwd;
};

// The generated source of an sm80-family kernel set (exposed for golden-file tests); the sm90 one is
// kernel_source_sm90 (runtime/tma_sm90.h).
std::string kernel_source(const codegen::GeneratedVariant& variant, const KernelSetKey& key);
// The backward's variant-independent kernels of key's dtype and head dims: the Δ preprocess and the dQ convert.
std::string kernel_source_bwd_aux(const KernelSetKey& key);

// Generates, compiles (through the JIT caches) and returns the kernel set. Cached in-process by the
// identity of the variant's expressions (hash-consed, so equal mods hit), so a decode loop that
// reuses its mods pays no codegen.
const KernelSet& get_kernel_set(const Variant& variant, const KernelSetKey& key);

// "bf16" / "fp16": the element-type tag of kernel names and sources; Error for other dtypes.
const char* kernel_dtype(DType t);

// NVRTC options of every kernel set: FLEXATTN_JIT_FAST_COMPILE=min|mid|max adds --Ofast-compile=<level>
// (NVRTC 12.8+; shorter compiles, different code: docs/env_vars.md). Error for another value.
std::vector<std::string> jit_compile_options();

// Key, registers and spills per entry function of a compiled set (compile_variant, compile_decode).
CompileReport compile_report(const KernelSet& set);
// Adds the registers and spill bytes of every entry of `c` to `r` (compile_report's step; compile_variant adds the
// kernels a call needs beside its set).
void add_to_report(CompileReport& r, const jit::CompiledKernel& c);

// A launch from a tile table's geometry (Sm80Launch, Sm90Launch, DecodeLaunch: grid_x/y/z, block, smem).
template <class Geometry>
jit::LaunchConfig launch_config(const Geometry& l, void* stream) {
  jit::LaunchConfig c;
  c.grid = {l.grid_x, l.grid_y, l.grid_z};
  c.block = {l.block, 1, 1};
  c.smem = l.smem;
  c.stream = static_cast<jit::CUstream>(stream);
  return c;
}

// The key of `backward`'s deterministic dQ pass (same dtype, head dims and arch; sm80 family, dq_pass).
KernelSetKey dq_pass_key(const KernelSetKey& backward);

// The backward's launches on `set` (compiled from `variant`): the delta preprocess, the family's main kernel
// ("flexattn_bwd") with `main`, then the dQ convert (every family's backward module holds the sm80 aux
// kernels) or, deterministic, the dQ pass of get_kernel_set(variant, dq_pass_key(set.key)).
void launch_backward(const Variant& variant, const KernelSet& set, const kern::AttnParams& p,
                     const jit::LaunchConfig& main, bool deterministic, void* stream);

// Throws Error when the backward cannot tile head dims (d, dv), naming the padded dims that work.
void check_backward_head_dims(int64_t d, int64_t dv);

// Fills ModParams from the layout and the bindings; throws flexattn::Error naming a missing or
// mismatched scalar / buffer / gradient.
void fill_mod_params(const codegen::VariantLayout& layout, const DeviceBindings& bindings, bool backward,
                     kern::ModParams* out);

}  // namespace flexattn::runtime
