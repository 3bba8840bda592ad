#pragma once
// Host side of the sm90 (Hopper) backward: FLEXATTN_SM90_BWD (default on since it passed
// gpu_attention_check on the H200, 2026-12-02; docs/env_vars.md), the support rules, the generated source of the kernel set, the tensor maps
// and the launches. Only the main (dK / dV / dQ-partials) kernel is Hopper-specific; the set also
// carries the sm80 family's preprocess, deterministic dQ pass and dQ convert (docs/kernels_sm90.md).
#include <optional>
#include <string>
#include <vector>

#include "flexattn/attention.h"
#include "flexattn/codegen.h"

namespace flexattn::kern {
struct AttnParams;
}

namespace flexattn::runtime {

struct KernelSetKey;
struct KernelSet;

// FLEXATTN_SM90_BWD is on (default on; read on every call).
bool sm90_backward_requested();

// FLEXATTN_SM90_BWD_DQ_BULK is on (default on since session 4: 232/232 checks, bwd +20-34% on the H200): the main kernel sums the two consumer warpgroups' dQ
// partials in shared memory and adds them into dq_accum with bulk reductions (docs/kernels_sm90.md,
// "Bulk dQ"). Read when a backward kernel set is generated and again at every launch (shared-memory
// size): set it before the process's first backward.
bool sm90_bwd_dq_bulk_requested();

// FLEXATTN_SM90_BWD_V2 is on (default off): the main kernel's consumers run FA3's per-tile schedule
// (docs/kernels_sm90.md, "Backward v2"), with its own bulk dQ when FLEXATTN_SM90_BWD_DQ_BULK is on too.
// Applies to D = 128 (Dv 64 / 128) only. Read when a set is generated and at every launch.
bool sm90_bwd_v2_requested();
// FLEXATTN_SM90_BWD_BG_REDUCE is on (default off): variants whose one learnable buffer's gradient index
// depends on the positions only through q_idx - kv_idx, or not at all (codegen's buffer_grad_reduce),
// sum the gradient contributions inside each warp and add one atomic per diagonal (per warp and tile)
// instead of one per entry (kernels/sm90/bwd_buffer_grad_sm90.cuh). Read when a set is generated.
bool sm90_bwd_bg_reduce_requested();
// The main kernel of a set with head dims (d, dv) is the v2 one: requested and supported.
bool sm90_bwd_v2_selected(int d, int dv);

// FLEXATTN_SM90_BWD_V3 is on (default off): the bulk dQ path's shared dQ tile is 128B-swizzled and added
// into dq_accum with D / 32 TMA tensor reductions through p->dq_map (docs/kernels_sm90.md, "Backward v3"):
// in the v2 kernel (D = 128) and in the first kernel at D = 64 (not at D = 128 with v2 off). Applies where
// the bulk dQ path is selected. Read when a set is generated.
bool sm90_bwd_v3_requested();

// FLEXATTN_SM90_BWD_PERSISTENT is on (default off): the main kernel is the persistent one (template
// argument kPersistent; docs/kernels_sm90.md, "Persistent backward"): one CTA per SM looping over the
// (kv tile, kv head, kv batch) work tiles from the tile queue, the next tile's K / V and first query
// tiles loading while the consumers write the previous tile's dK / dV. Read when a set is generated.
bool sm90_bwd_persistent_requested();
// FLEXATTN_SM90_BWD_PERSISTENT=auto (opt-in, session 10): the persistent kernel for the calls where it measured
// faster — D = Dv = 64, not deterministic (H200 S=8192 D=64: document +19 %, sliding +5 %, causal -1 %; at D = 128
// no gain, session 6; deterministic mode would lose the ordered dQ) — as its own kernel set
// (KernelSetKey::sm90_bwd_persistent). 1 / 0: that call's set is the persistent / default one; -1 (unset, 0, 1):
// the switch as read when the set is built.
int sm90_bwd_persistent_for_call(int d, int dv, bool deterministic);
// The template-argument tail of the persistent kernel for the dQ-path tail `args` of the default one
// ("", ", true", ..., ", true, true, true"): kDqBulk, kV2, kDqTma spelled out, then ", true".
std::string sm90_bwd_persistent_args(const std::string& args);

// The template arguments kDqBulk, kV2, kDqTma and kPersistent of the main kernel that a generated sm90
// backward source instantiates (false where absent).
struct Sm90BwdChoice {
  bool dq_bulk = false, v2 = false, dq_tma = false, persistent = false;
  bool grid_order = false;  // FLEXATTN_SM90_BWD_GRID_ORDER compiled in
  bool tma_store = false;   // FLEXATTN_SM90_BWD_TMA_STORE compiled in
  bool rank_warp = false;   // the deterministic mode's rank warp compiled in (kernels/sm90/bwd_dq_rank_sm90.cuh)
};
Sm90BwdChoice sm90_bwd_source_choice(const std::string& source);

// FLEXATTN_SM90_BWD_ORDERED_DQ is on (default on): in deterministic mode the sm90 main kernel adds dQ itself,
// its reductions ordered by semaphores (docs/kernels_sm90.md, "Deterministic dQ"); off, the sm80 family's
// separate dQ pass computes dQ as before. Applies to the bulk dQ paths of the non-persistent kernel.
bool sm90_bwd_ordered_dq_requested();

// FLEXATTN_SM90_BWD_TMA_STORE (default on): the non-persistent sm90 backward writes dK / dV with TMA stores.
bool sm90_bwd_tma_store_requested();

// dk_map and dv_map of p (4-D maps of dK / dV as k_map's, 64-row boxes); false when the TMA unit cannot take the
// layout (then the kernel stores pair by pair).
bool encode_sm90_dkv_maps(kern::AttnParams* p, DType dtype);
// FLEXATTN_SM90_BWD_HEAD_GROUPS: unset / `auto` (the default): the non-persistent main kernel of a variant with a
// mask_mod is compiled with the grouped launch order (FLEXATTN_SM90_BWD_GRID_ORDER) and launched with
// p.bwd_head_group from sm90_bwd_head_group when the call has a block mask or is deterministic (H200, session 10:
// causal / document faster, default and deterministic; the dense kernel ~3 % slower with the order compiled in,
// so it keeps the grid's own); `1`: every variant, every call; `0`: never (not compiled in).
enum class Sm90BwdHeadGroups { off, automatic, always };
Sm90BwdHeadGroups sm90_bwd_head_groups_mode();
// KernelSetKey::sm90_bwd_grid_order for a call: 1 for deterministic calls of variants without a mask_mod under auto
// (the order paid in deterministic mode for dense variants too: full S=4096 1.695 -> 1.535 ms, S=8192 5.727 ->
// 5.558), else -1 (the mode's rule, which compiles it into every variant with a mask_mod already: asking for 1
// there would key a second set with the same source).
int sm90_bwd_grid_order_for_call(bool deterministic, bool has_mask_mod);
// The launch's p.bwd_head_group under that mode: 1 (the grid's own order) or the L2-sized group.
int sm90_bwd_launch_head_group(const kern::AttnParams& p, bool deterministic, bool compiled_in);
// The persistent kernel's p.bwd_head_group (its work-tile order, sm90_bwd_work_tile; read at run time, nothing compiled
// in): the L2-sized group, or under `0` one group of every pair (kv tiles over all pairs, the order before session 28).
int sm90_bwd_persistent_head_group(const kern::AttnParams& p);
// Deterministic mode on this sm90 backward set takes the ordered dQ reductions (requested, bulk dQ path,
// non-persistent kernel) instead of the sm80 dQ pass.
bool sm90_bwd_orders_dq(const KernelSet& set);
// FLEXATTN_SM90_BWD_DQ_CLAIM (default on since session 31, off in deterministic mode since session 32): the first dQ
// writer of each query tile with few writers stores it (no accumulator clear for that tile; p.dq_claim).
bool sm90_bwd_dq_claim_requested(bool deterministic);
// FLEXATTN_SM90_BWD_DQ_CLAIM_MAX_KV: only query tiles whose kv blocks span at most this many kv rows are claimed
// (p.dq_claim_max_kv, kernels/sm90/bwd_dq_claim_rule_sm90.h); the others are cleared and added into as before.
constexpr int kSm90BwdDqClaimMaxKv = 2048;
int sm90_bwd_dq_claim_max_kv();

// Byte offsets of cuda_backward's workspace: delta [B, Hq, L] fp32, the dQ accumulator [B, Hq, L, D] fp32,
// the dQ claim words (kern::sm90::bwd_dq_semaphores ints, FLEXATTN_SM90_BWD_DQ_CLAIM), and in deterministic mode
// the ordered-dQ semaphores (as many); each region starts 256-aligned. bytes = backward_workspace_bytes.
struct BackwardWorkspace {
  size_t accum = 0, claim = 0, sem = 0, bytes = 0;
};
BackwardWorkspace backward_workspace(int64_t B, int64_t Hq, int64_t L, int64_t D, bool deterministic);
// The sm90 backward's deferred launch order (FLEXATTN_SM90_BWD_CTA_ORDER, default on; kernels/sm90/bwd_cta_order_sm90.cuh):
// two ints per main-kernel CTA (the order, then the walks), from the next 256-byte boundary after `w`'s regions.
bool sm90_bwd_cta_order_requested();
size_t bwd_cta_order_bytes(int64_t S, int64_t Hkv, int64_t Bkv);
inline size_t bwd_cta_order_offset(const BackwardWorkspace& w) { return (w.bytes + 255) / 256 * 256; }

// FLEXATTN_SM90_BWD_PAD_HEAD_DIM (default on since session 32) and FLEXATTN_SM90_PAD_HEAD_DIM on: the
// backward pads head dims onto the next compiled kernel (kern::sm90_bwd_padded_head_dim).
bool sm90_bwd_pad_head_dims_requested();
// The sm90 backward kernel's head dim for a call's d: d when compiled (64, 128, 256), the padded dim when
// sm90_bwd_pad_head_dims_requested, else 0.
int sm90_bwd_head_dim(int d);
// The sm90 backward set a call asks for (try_sm90_backward), and so the one compile_variant and the GPU check prewarm:
// the kernel's head dims (sm90_bwd_head_dim; d, dv supported), non-persistent when padded, else the call's persistent
// choice, and its grid order. nullopt: the call declines before compiling (padded onto the wide kernel in
// deterministic mode, which has no ordered dQ reductions).
std::optional<KernelSetKey> sm90_bwd_call_key(DType dtype, int d, int dv, const std::string& arch, bool deterministic,
                                              bool has_mask_mod);
// Whether the sm90 backward can run this problem (p filled and validated by cuda_backward): arch
// "sm_90a", kernel head dims (sm90_bwd_head_dim) in {64, 128} or D = Dv = 256, mask blocks (when a mask is given)
// multiples of (64, 128). `why` gets the reason when not.
bool sm90_backward_supported(const std::string& arch, const kern::AttnParams& p, std::string* why = nullptr);

// Encodes p->q_map (Q), k_map (K), v_map (V) and o_map (dO, not O) with 64-row boxes. Throws Error
// naming the tensor when the driver rejects a map.
void encode_sm90_backward_maps(kern::AttnParams* p, DType dtype);

// Encodes p->dq_map (dq_accum [B * Hq, L, accum_d], fp32, for the v3 main kernel; FLEXATTN_SM90_BWD_V3; accum_d the
// kernel's head dim). Throws Error when the driver rejects it.
void encode_sm90_dq_accum_map(kern::AttnParams* p, int accum_d);

// The generated source of the sm90 backward kernel set's main kernel, flexattn_bwd (the preprocess and the dQ convert
// are the sm80 family's, kernel_source_bwd_aux; the deterministic dQ pass is a set of its own).
// dq_bulk: 1 / 0 choose the dQ path, -1 (default) follows FLEXATTN_SM90_BWD_DQ_BULK; bg_reduce likewise
// for FLEXATTN_SM90_BWD_BG_REDUCE (it reaches the source only for variants with buffer_grad_reduce).
// persistent likewise for FLEXATTN_SM90_BWD_PERSISTENT; grid_order (the grouped launch order, non-persistent
// kernel only) for FLEXATTN_SM90_BWD_HEAD_GROUPS != 0; tma_store (the TMA-store epilogue, non-persistent kernel only)
// for FLEXATTN_SM90_BWD_TMA_STORE; rank_warp (deterministic mode's rank warp, kernels with the rank ring only) for
// FLEXATTN_SM90_BWD_RANK_WARP.
std::string kernel_source_sm90_bwd(const codegen::GeneratedVariant& variant, const KernelSetKey& key, int dq_bulk = -1,
                                   int bg_reduce = -1, int persistent = -1, int grid_order = -1, int tma_store = -1,
                                   int rank_warp = -1);

// The sources get_kernel_set compiles for an sm90 backward set, in order, if each one's main kernel spilled: `first`
// (the default source), then the same kernel without the persistent loop, without the rank warp, without the
// TMA-store epilogue, without the grouped launch order (each only where the source before had it), then the dQ-path / buffer-gradient-sum
// fallbacks. The set takes the first that compiles without spills (or the last). Consecutive duplicates dropped.
std::vector<std::string> sm90_bwd_fallback_sources(const codegen::GeneratedVariant& variant, const KernelSetKey& key,
                                                   const std::string& first);

// The dispatch hook of cuda_backward: runs the whole backward on the sm90 set and returns true, or
// returns false (with the reason under FLEXATTN_JIT_DEBUG=1) and the caller runs the sm80 family.
// p must be completely filled (tensors, mask, delta / dq_accum workspace) by the caller.
bool try_sm90_backward(const BackwardArgs& a, kern::AttnParams& p, const std::string& arch);

}  // namespace flexattn::runtime
