// The sm90 backward: opt-in, support rules, generated source, tensor maps, launches.
#include "runtime/sm90_backward.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

#include "common/params.h"
#include "flexattn/error.h"
#include "jit/module.h"
#include "jit/sys.h"
#include "jit/device.h"
#include "jit/driver_api.h"
#include "runtime/kernel_set.h"
#include "runtime/sm90_tile_queue.h"
#include "runtime/tma_sm90.h"
#include "sm80/tile_config.h"
#include "sm90/bwd_dq_order_sm90.h"
#include "sm90/tile_config_sm90_bwd.h"

namespace flexattn::runtime {

namespace {

std::string num(int64_t v) { return std::to_string(v); }

}  // namespace

bool sm90_backward_requested() { return jit::env_flag("FLEXATTN_SM90_BWD", true); }

bool sm90_bwd_dq_bulk_requested() { return jit::env_flag("FLEXATTN_SM90_BWD_DQ_BULK", true); }

bool sm90_bwd_v2_requested() { return jit::env_flag("FLEXATTN_SM90_BWD_V2", true); }

bool sm90_bwd_v3_requested() { return jit::env_flag("FLEXATTN_SM90_BWD_V3", true); }

bool sm90_bwd_bg_reduce_requested() { return jit::env_flag("FLEXATTN_SM90_BWD_BG_REDUCE", true); }

bool sm90_bwd_ordered_dq_requested() { return jit::env_flag("FLEXATTN_SM90_BWD_ORDERED_DQ", true); }

bool sm90_bwd_tma_store_requested() { return jit::env_flag("FLEXATTN_SM90_BWD_TMA_STORE", true); }

// Deterministic mode's default is off: s31b (H100, long128 D=128) timed its ordered backward with claims at causal
// 3.33 ms against 3.12 without (-6.3 %), document +1.8 %, sliding window -0.5 %.
bool sm90_bwd_dq_claim_requested(bool deterministic) {
  return jit::env_flag("FLEXATTN_SM90_BWD_DQ_CLAIM", !deterministic);
}
int sm90_bwd_dq_claim_max_kv() {
  return int(jit::env_number("FLEXATTN_SM90_BWD_DQ_CLAIM_MAX_KV", kSm90BwdDqClaimMaxKv, 0, 1 << 30));
}

bool encode_sm90_dkv_maps(kern::AttnParams* p, DType dtype) {
  try {
    encode_sm90_map(sm90_map_args("dk", p->dk, dtype, p->Bkv, p->Hkv, p->S, p->D, p->dk_sb, p->dk_sh, p->dk_sl, 64), "dk",
                    &p->dk_map);
    encode_sm90_map(sm90_map_args("dv", p->dv, dtype, p->Bkv, p->Hkv, p->S, p->Dv, p->dv_sb, p->dv_sh, p->dv_sl, 64),
                    "dv", &p->dv_map);
  } catch (const Error&) {  // a layout the TMA unit cannot store (unaligned base or strides): the per-pair stores
    return false;
  }
  return true;
}

bool sm90_bwd_orders_dq(const KernelSet& set) {
  // Not the wide kernel (D = Dv = 256): the order (bwd_dq_order_sm90.h) counts 128-row kv tiles.
  return set.key.family == KernelFamily::sm90 && set.key.backward && set.sm90_dq_bulk && !set.sm90_bwd_persistent &&
         !kern::sm90_bwd_wide(set.key.d, set.key.dv) && sm90_bwd_ordered_dq_requested();
}

BackwardWorkspace backward_workspace(int64_t B, int64_t Hq, int64_t L, int64_t D, bool deterministic) {
  auto align = [](size_t n) { return (n + 255) / 256 * 256; };
  BackwardWorkspace w;
  w.accum = align(size_t(B * Hq * L) * 4);
  // The accumulator at the head dim the sm90 backward pads D onto (sm90_bwd_head_dim), whichever family the call takes.
  const int64_t accum_d = std::max<int64_t>(D, sm90_bwd_head_dim(int(D)));
  w.bytes = w.accum + size_t(B * Hq * L * accum_d) * 4;
  w.claim = align(w.bytes);
  w.bytes = w.claim + size_t(kern::sm90::bwd_dq_semaphores(int(B), int(Hq), int(L))) * 4;
  if (deterministic) {
    w.sem = align(w.bytes);
    w.bytes = w.sem + size_t(kern::sm90::bwd_dq_semaphores(int(B), int(Hq), int(L))) * 4;
  }
  return w;
}

Sm90BwdHeadGroups sm90_bwd_head_groups_mode() {
  const std::string v = jit::env_lower("FLEXATTN_SM90_BWD_HEAD_GROUPS");
  if (v.empty() || v == "auto") return Sm90BwdHeadGroups::automatic;
  if (v == "1" || v == "true" || v == "yes" || v == "on") return Sm90BwdHeadGroups::always;
  if (v == "0" || v == "false" || v == "no" || v == "off") return Sm90BwdHeadGroups::off;
  // (a typo read as a flag fell back to `always`, silently changing the launch order)
  throw Error("FLEXATTN_SM90_BWD_HEAD_GROUPS: expected auto, 0 or 1, got '" +
              jit::env_or("FLEXATTN_SM90_BWD_HEAD_GROUPS") + "'");
}

// Default on since session 35 (H100, s35e: document backward -0.4 / -3.6 %, the other masks within +-0.5 %).
bool sm90_bwd_cta_order_requested() { return jit::env_flag("FLEXATTN_SM90_BWD_CTA_ORDER", true); }

size_t bwd_cta_order_bytes(int64_t S, int64_t Hkv, int64_t Bkv) {
  return size_t(2) * size_t((S + kern::kSm90BwdBlockN - 1) / kern::kSm90BwdBlockN) * size_t(Hkv * Bkv) * 4;
}

int sm90_bwd_grid_order_for_call(bool deterministic, bool has_mask_mod) {
  return deterministic && !has_mask_mod && sm90_bwd_head_groups_mode() == Sm90BwdHeadGroups::automatic ? 1 : -1;
}

int sm90_bwd_launch_head_group(const kern::AttnParams& p, bool deterministic, bool compiled_in) {
  const Sm90BwdHeadGroups mode = sm90_bwd_head_groups_mode();
  const bool grouped = compiled_in && (mode == Sm90BwdHeadGroups::always ||
                                       (mode == Sm90BwdHeadGroups::automatic &&
                                        (p.kv_num_blocks != nullptr || deterministic)));
  return grouped ? kern::sm90_bwd_head_group(p.B, p.Hq, p.Hkv, p.Bkv, p.L, p.S, p.D, p.Dv) : 1;
}

int sm90_bwd_persistent_head_group(const kern::AttnParams& p) {
  return sm90_bwd_head_groups_mode() == Sm90BwdHeadGroups::off
             ? p.Hkv * p.Bkv
             : kern::sm90_bwd_head_group(p.B, p.Hq, p.Hkv, p.Bkv, p.L, p.S, p.D, p.Dv);
}

bool sm90_bwd_persistent_requested() { return jit::env_flag("FLEXATTN_SM90_BWD_PERSISTENT", false); }

int sm90_bwd_persistent_for_call(int d, int dv, bool deterministic) {
  if (jit::env_lower("FLEXATTN_SM90_BWD_PERSISTENT") != "auto") return -1;
  return d == 64 && dv == 64 && !deterministic ? 1 : 0;
}

std::string sm90_bwd_persistent_args(const std::string& args) {
  // args: "", ", true", ", false, true", ", true, true", ", true, false, true" or ", true, true, true"
  // (kDqBulk, kV2, kDqTma as far as given); kPersistent is the eighth template argument.
  std::string full = args;
  for (size_t n = size_t(std::count(args.begin(), args.end(), ',')); n < 3; ++n) full += ", false";
  return full + ", true";
}

bool sm90_bwd_v2_selected(int d, int dv) { return sm90_bwd_v2_requested() && kern::sm90_bwd_v2_head_dims_ok(d, dv); }

namespace {
const char* const kGridOrderDefine = "#define FLEXATTN_SM90_BWD_GRID_ORDER 1\n";
const char* const kTmaStoreDefine = "#define FLEXATTN_SM90_BWD_TMA_STORE 1\n";
const char* const kNoRankWarpDefine = "#define FLEXATTN_SM90_BWD_NO_RANK_WARP 1\n";
}  // namespace

Sm90BwdChoice sm90_bwd_source_choice(const std::string& source) {
  Sm90BwdChoice c;
  const std::string head = "attn_bwd_sm90<";
  const size_t at = source.find(head);
  if (at == std::string::npos) return c;
  const size_t end = source.find(">(p)", at);
  if (end == std::string::npos) return c;
  // FlexVariant, T, D, Dv[, kDqBulk[, kV2]]
  std::vector<std::string> args;
  std::stringstream list(source.substr(at + head.size(), end - at - head.size()));
  for (std::string a; std::getline(list, a, ',');) {
    a.erase(0, a.find_first_not_of(' '));
    args.push_back(a);
  }
  c.dq_bulk = args.size() > 4 && args[4] == "true";
  c.v2 = args.size() > 5 && args[5] == "true";
  c.dq_tma = args.size() > 6 && args[6] == "true";
  c.persistent = args.size() > 7 && args[7] == "true";
  c.grid_order = source.find(kGridOrderDefine) != std::string::npos;
  c.tma_store = source.find(kTmaStoreDefine) != std::string::npos;
  const bool wide = args.size() > 2 && args[2] == "256";
  c.rank_warp = !wide && !c.persistent && kern::sm90_bwd_has_rank_ring(c.dq_bulk, c.v2, c.dq_tma) &&
                source.find(kNoRankWarpDefine) == std::string::npos;
  return c;
}


bool sm90_bwd_pad_head_dims_requested() {
  return sm90_pad_head_dims_requested() && jit::env_flag("FLEXATTN_SM90_BWD_PAD_HEAD_DIM", true);
}

int sm90_bwd_head_dim(int d) {
  const int padded = kern::sm90_bwd_padded_head_dim(d);
  return padded == d || sm90_bwd_pad_head_dims_requested() ? padded : 0;
}

std::optional<KernelSetKey> sm90_bwd_call_key(DType dtype, int d, int dv, const std::string& arch, bool deterministic,
                                              bool has_mask_mod) {
  KernelSetKey key{dtype, sm90_bwd_head_dim(d), sm90_bwd_head_dim(dv), arch, true, KernelFamily::sm90};
  const bool padded = key.d != d || key.dv != dv;
  // The wide kernel never orders its dQ reductions, so try_sm90_backward would decline a deterministic padded call
  // there after compiling it.
  if (padded && deterministic && kern::sm90_bwd_wide(key.d, key.dv)) return std::nullopt;
  // Padded: non-persistent (its dK / dV leave through TMA stores, which write nothing past the real dims; the
  // persistent kernel stores pair by pair).
  key.sm90_bwd_persistent = padded ? 0 : sm90_bwd_persistent_for_call(key.d, key.dv, deterministic);
  key.sm90_bwd_grid_order = sm90_bwd_grid_order_for_call(deterministic, has_mask_mod);
  return key;
}

bool sm90_backward_supported(const std::string& arch, const kern::AttnParams& p, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why) *why = "backward: " + reason;
    return false;
  };
  if (arch != "sm_90a") return no("the device is " + arch + ", the sm90 kernels need sm_90a");
  const int kd = sm90_bwd_head_dim(p.D), kdv = sm90_bwd_head_dim(p.Dv);
  if (kd == 0 || kdv == 0 || !kern::sm90_bwd_head_dims_ok(kd, kdv))
    return no("head dims D=" + num(p.D) + ", Dv=" + num(p.Dv) + " (the sm90 backward takes 64 and 128, and D = Dv = 256" +
              (sm90_bwd_pad_head_dims_requested()
                   ? ", and multiples of 16 between 64 and 256 on the next of them)"
                   : "; with FLEXATTN_SM90_PAD_HEAD_DIM and FLEXATTN_SM90_BWD_PAD_HEAD_DIM on, the default, the multiples of 16 "
                     "between them run on the next of them)"));
  const int block_n = kern::sm90_bwd_block_n(kd, kdv);
  if (p.kv_num_blocks != nullptr && !kern::sm90_bwd_mask_blocks_ok(p.q_block, p.kv_block, block_n))
    return no("block mask BLOCK_SIZE (" + num(p.q_block) + ", " + num(p.kv_block) + ") is not a multiple of (" +
              num(kern::kSm90BwdBlockM) + ", " + num(block_n) + ")");
  return true;
}

void encode_sm90_backward_maps(kern::AttnParams* p, DType dtype) {
  encode_sm90_map(sm90_map_args("q", p->q, dtype, p->B, p->Hq, p->L, p->D, p->q_sb, p->q_sh, p->q_sl, 64), "q",
                  &p->q_map);
  encode_sm90_map(sm90_map_args("k", p->k, dtype, p->Bkv, p->Hkv, p->S, p->D, p->k_sb, p->k_sh, p->k_sl, 64), "k",
                  &p->k_map);
  encode_sm90_map(sm90_map_args("v", p->v, dtype, p->Bkv, p->Hkv, p->S, p->Dv, p->v_sb, p->v_sh, p->v_sl, 64), "v",
                  &p->v_map);
  encode_sm90_map(
      sm90_map_args("dout", p->dout, dtype, p->B, p->Hq, p->L, p->Dv, p->dout_sb, p->dout_sh, p->dout_sl, 64), "dout",
      &p->o_map);
}

// dq_accum [B * Hq, L, D] fp32, contiguous (cuda_backward's workspace): 3-D map, box (32, 64, 1), 128B
// swizzle (kernels/sm90/tile_config_sm90_bwd.h, v3 dQ tile); rows >= L fall outside dim 1.
void encode_sm90_dq_accum_map(kern::AttnParams* p, int accum_d) {
  TmaMapArgs a;
  a.data_type = 7;  // CU_TENSOR_MAP_DATA_TYPE_FLOAT32
  a.rank = 3;
  a.address = p->dq_accum;
  a.dims[0] = uint64_t(accum_d), a.dims[1] = uint64_t(p->L), a.dims[2] = uint64_t(p->B) * uint64_t(p->Hq);
  a.dims[3] = 1;
  a.strides[0] = uint64_t(accum_d) * 4, a.strides[1] = uint64_t(p->L) * uint64_t(accum_d) * 4, a.strides[2] = 0;
  a.box[0] = 32, a.box[1] = 64, a.box[2] = 1, a.box[3] = 1;
  encode_sm90_map(a, "dq_accum", &p->dq_map);
}

std::vector<std::string> sm90_bwd_fallback_sources(const codegen::GeneratedVariant& variant, const KernelSetKey& key,
                                                   const std::string& first) {
  std::vector<std::string> path{first};
  auto add = [&](std::string source) {
    if (source != path.back()) path.push_back(std::move(source));
  };
  const Sm90BwdChoice choice = sm90_bwd_source_choice(first);
  // FLEXATTN_SM90_BWD_PERSISTENT: a persistent main kernel that spills is rebuilt as the default one first (same dQ
  // path and buffer gradients; the tile loop's state costs the consumers a few registers: softcap + causal,
  // document:3 spilled 40-250 bytes with ptxas 13.0).
  const int persistent = choice.persistent ? 0 : -1;
  if (persistent == 0) add(kernel_source_sm90_bwd(variant, key, -1, -1, 0));
  // Then the rank warp (it serves only deterministic mode; with it t5's reduced buffer gradients spilled 40 bytes in
  // the v2 kernel at D = 128, ptxas 13.0), and it stays out of every later fallback.
  const int rank_warp = sm90_bwd_source_choice(path.back()).rank_warp ? 0 : -1;
  if (rank_warp == 0) add(kernel_source_sm90_bwd(variant, key, -1, -1, persistent, -1, -1, 0));
  // The TMA-store epilogue goes next, keeping everything else (the constant-relbias v2 at D = 128 spilled with it
  // and would otherwise have lost its bulk dQ path: 462 -> 387 TFLOP/s).
  const int tma_store = sm90_bwd_source_choice(path.back()).tma_store ? 0 : -1;
  if (tma_store == 0) add(kernel_source_sm90_bwd(variant, key, -1, -1, persistent, -1, 0, rank_warp));
  // The grouped launch order's index math is the cheapest thing to give up after that (alibi-slopes / t5 v2 at
  // D = 128 spilled 16 bytes with it, ptxas 13.0), keeping the dQ path.
  const int grid_order = sm90_bwd_source_choice(path.back()).grid_order ? 0 : -1;
  if (grid_order == 0) add(kernel_source_sm90_bwd(variant, key, -1, -1, persistent, 0, tma_store, rank_warp));
  // The bulk dQ path holds the shared-tile addressing on top of the per-element path's registers; for the heaviest
  // mods at D=128 (document:3, relbias(learnable), text:mixed: 92-620 spilled bytes with ptxas 13.0) the
  // per-element path compiles clean. FLEXATTN_SM90_BWD_BG_REDUCE's 18 partial sums per thread likewise: without
  // them first (keeping bulk dQ), then on the per-element dQ path with, then without.
  const bool bg = path.back().find("#define FLEXATTN_SM90_BWD_BG_REDUCE 1") != std::string::npos;
  struct Try {
    int dq_bulk, bg_reduce;
  };
  std::vector<Try> fallbacks;
  if (bg && choice.dq_bulk) fallbacks = {{1, 0}, {0, 1}, {0, 0}};
  else if (bg) fallbacks = {{0, 0}};
  else if (choice.dq_bulk) fallbacks = {{0, 0}};
  for (const Try& t : fallbacks)
    add(kernel_source_sm90_bwd(variant, key, t.dq_bulk, t.bg_reduce, persistent, grid_order, tma_store, rank_warp));
  return path;
}

std::string kernel_source_sm90_bwd(const codegen::GeneratedVariant& variant, const KernelSetKey& key, int dq_bulk,
                                   int bg_reduce, int persistent, int grid_order, int tma_store, int rank_warp) {
  if (key.dtype != DType::BF16 && key.dtype != DType::F16)
    throw Error("dtype: the sm90 backward takes bf16 or f16 tensors, got " + std::string(dtype_name(key.dtype)));
  if (!kern::sm90_bwd_head_dims_ok(key.d, key.dv))
    throw Error("head dims: the sm90 backward takes 64 or 128, or D = Dv = 256, got D=" + std::to_string(key.d) +
                ", Dv=" + std::to_string(key.dv));
  // The wide kernel (D = Dv = 256) has one dQ path (bulk, TMA reductions), no persistent form and no per-warp
  // buffer-gradient sums: those switches do not apply to it (the grouped launch order does).
  const bool wide = kern::sm90_bwd_wide(key.d, key.dv);
  const bool v2 = !wide && sm90_bwd_v2_selected(key.d, key.dv);
  const std::string t = key.dtype == DType::BF16 ? "bf16" : "fp16";
  const std::string dd = std::to_string(key.d) + ", " + std::to_string(key.dv);
  // The per-element dQ path has no fifth template argument (the kernel that existed before the bulk
  // path); the bulk path gets kDqBulk = true; FLEXATTN_SM90_BWD_V2 (D = 128 only) adds a sixth,
  // kV2 = true, after kDqBulk (true or false).
  const bool use_bulk = dq_bulk < 0 ? sm90_bwd_dq_bulk_requested() : dq_bulk != 0;
  // FLEXATTN_SM90_BWD_V3 adds a seventh, kDqTma = true, to the bulk path only: v2 + bulk, and the first
  // kernel's bulk path at D = 64 as ", true, false, true" (at D = 128 with v2 off the first kernel keeps
  // its padded tiles: with kDqTma softcap + causal spilled 68 bytes there, NVRTC 13.0).
  const bool v3 = sm90_bwd_v3_requested();
  const bool tma_dq = use_bulk && v3 && (v2 || key.d == 64);  // kDqTma
  const std::string v2_bulk = tma_dq ? ", true, true, true" : ", true, true";
  const std::string v1_bulk = tma_dq ? ", true, false, true" : ", true";
  const std::string dq_args = wide                                 ? ", true, false, true"
                              : v2       ? (use_bulk ? v2_bulk : ", false, true")
                              : use_bulk ? v1_bulk
                                         : "";
  // FLEXATTN_SM90_BWD_PERSISTENT: the eighth, kPersistent = true, after all three dQ arguments.
  const int chosen = persistent >= 0 ? persistent : key.sm90_bwd_persistent;
  const bool use_persistent = !wide && (chosen < 0 ? sm90_bwd_persistent_requested() : chosen != 0);
  const std::string bulk = use_persistent ? sm90_bwd_persistent_args(dq_args) : dq_args;
  auto entry = [](const char* name, const std::string& bounds, const std::string& body) {
    return "extern \"C\" __global__ void __launch_bounds__(" + bounds + ", 1)\n" + name +
           "(const __grid_constant__ AttnParams p) { " + body + "; }\n";
  };
  std::ostringstream s;
  s << "// flexattn backward kernel, sm90 family (sm_90a; preprocess and dQ convert: kernel_source_bwd_aux), " << t
    << ", D=" << key.d << ", Dv=" << key.dv << "\n";
  // FLEXATTN_SM90_GATHER (default on, as the forward's): constant relative-position-bias score_mods read their row
  // at immediate offsets of one pointer (kernels/sm90/bwd_rel_gather_sm90.cuh); learnable rows keep the general
  // form, so only constant ones get the define (the others' sources stay byte-identical).
  const bool gather_define =
      variant.rel_gather != 0 && !variant.has_buffer_grad && jit::env_flag("FLEXATTN_SM90_GATHER", true);
  // Buffer gradients summed per warp before the atomics (kernels/sm90/bwd_buffer_grad_sm90.cuh), only in
  // sources whose variant can use it: the others stay byte-identical with the switch on.
  const bool bg_define =
      !wide && variant.buffer_grad_reduce != 0 && (bg_reduce < 0 ? sm90_bwd_bg_reduce_requested() : bg_reduce != 0);
  if (bg_define) s << "#define FLEXATTN_SM90_BWD_BG_REDUCE 1\n";
  // FLEXATTN_SM90_BWD_DQ_SWAP (default on since session 29): the v3 dQ buffers' stores in a lane-dependent block order
  // that keeps each half-warp on 32 distinct banks (bwd_consumer_sm90.cuh DqSlots). H100, s29f (B=2 H=16 S=8192
  // backward ms): full, causal, sliding, document 1.5-2.6 % faster at D 64 and 128; checks and memcheck clean.
  // 0: the sources as before session 29.
  if (jit::env_flag("FLEXATTN_SM90_BWD_DQ_SWAP", true)) s << "#define FLEXATTN_SM90_BWD_DQ_SWAP 1\n";
  // FLEXATTN_SM90_BWD_RANK_WARP (default on): in deterministic mode warp 3 reads the ordered writers' ranks ahead
  // (kernels/sm90/bwd_dq_rank_sm90.cuh); 0 compiles it out (the writers compute them, as before session 33).
  // Only kernels with the rank ring get the define (the others' sources stay byte-identical either way).
  const bool ring = !wide && !use_persistent && kern::sm90_bwd_has_rank_ring(use_bulk, v2, tma_dq);
  if (ring && !(rank_warp < 0 ? jit::env_flag("FLEXATTN_SM90_BWD_RANK_WARP", true) : rank_warp != 0))
    s << kNoRankWarpDefine;
  // FLEXATTN_SM90_BWD_HEAD_GROUPS: the grouped launch order (sm90_bwd_grid_tile) of the non-persistent kernel. Its
  // index math spilled 16 bytes in the alibi-slopes and t5 (buffer-gradient) v2 kernels at D = 128 (ptxas 13.0):
  // get_kernel_set recompiles a kernel that spills without it first.
  // By default only variants with a mask_mod get it: compiled in, it cost the dense (no mask_mod) kernel ~3 % even
  // when launched in the grid's own order (H200, session 10: full B=2 H=16 S=8192 D=128 4.77 -> 4.94 ms).
  const Sm90BwdHeadGroups mode = sm90_bwd_head_groups_mode();
  const int order = grid_order >= 0 ? grid_order : key.sm90_bwd_grid_order;
  const bool use_grid_order = order >= 0 ? order != 0
                                         : mode == Sm90BwdHeadGroups::always ||
                                               (mode == Sm90BwdHeadGroups::automatic && variant.has_mask_mod);
  if (use_grid_order && !use_persistent) s << kGridOrderDefine;
  // FLEXATTN_SM90_BWD_TMA_STORE: the TMA-store epilogue compiled in (non-persistent kernels; taken at a launch with
  // p.dkv_tma). A kernel that spills with it is recompiled without it first (get_kernel_set): compiled in, it pushed
  // the v2's constant-relbias kernel at D = 128 over its registers, which then lost its bulk dQ path (462 -> 387
  // TFLOP/s on the H200, session 12).
  // The v2 kernel compiles it in only beside the bulk dQ path and without the buffer-gradient sums
  // (bwd_consumer_v2_sm90.cuh kTmaEpilogue); elsewhere the define would only make a different source of the same
  // kernel, which get_kernel_set's spill fallbacks then recompiled for nothing (learnable relbias + causal at D = 128:
  // three compiles, session 15). By default (tma_store < 0) the v2's relative-bias gather without a mask_mod goes
  // without it: measured on the H200 (session 15, B=2 H=16 S=8192 D=128 backward ms, two runs each) 6.10 with it,
  // 5.78 without; with a causal mask it helps (3.09 / 3.16), as for dense attention (4.79 / 4.85).
  // The first kernel takes it only where sm90_bwd_first_kernel_tma_store_ok: without the define elsewhere the set's
  // sm90_bwd_tma_store says what runs, which the padded head dims rely on (their dK / dV columns past the real dims
  // must not be stored; session 31's review: V2=0 at 96 / 96 stored pair by pair past them).
  const bool tma_inert =
      (v2 && (bg_define || !use_bulk)) || (!v2 && !wide && !kern::sm90_bwd_first_kernel_tma_store_ok(key.d, key.dv));
  const bool tma_default = sm90_bwd_tma_store_requested() && !(v2 && gather_define && !variant.has_mask_mod);
  if (!use_persistent && !tma_inert && (tma_store < 0 ? tma_default : tma_store != 0)) s << kTmaStoreDefine;
  // FLEXATTN_SM90_AFFINE (default on, as the forward's): ALiBi-shaped score_mods evaluate their bias as an affine
  // function of the position (kernels/sm90/rel_affine_sm90.cuh); only their sources get the define, and not the
  // persistent kernel's at D = 128 (with it ALiBi + causal spilled there, ptxas 13.0; clean at D = 64).
  if (variant.rel_affine && (!use_persistent || key.d <= 64) && jit::env_flag("FLEXATTN_SM90_AFFINE", true))
    s << "#define FLEXATTN_SM90_REL_AFFINE 1\n";
  if (gather_define) s << "#define FLEXATTN_SM90_REL_GATHER 1\n";
  s << "#include \"common/mod_ops.cuh\"\n";
  s << "#include \"sm80/attn_bwd_sm80.cuh\"\n";
  s << "#include \"sm90/attn_bwd_sm90.cuh\"\n";
  s << "using namespace flexattn::kern;\n\n";
  s << variant.source << "\n";
  s << entry("flexattn_bwd", "kSm90Threads", "attn_bwd_sm90<FlexVariant, " + t + ", " + dd + bulk + ">(p)");
  // FLEXATTN_SM90_BWD_CTA_ORDER: the grouped order's deferral of short CTAs, built before a launch that asks for it
  // (kernels/sm90/bwd_cta_order_sm90.cuh); in every source with the grouped order, so the switch needs no new set.
  // Not the wide kernel's (64-row kv tiles; the order counts 128-row ones).
  if (use_grid_order && !use_persistent && !wide)
    s << entry("flexattn_bwd_cta_order", "kSm90BwdOrderThreads",
               "sm90::bwd_cta_order_build(p, (p.S + kSm90BwdBlockN - 1) / kSm90BwdBlockN)");
  return s.str();
}

bool try_sm90_backward(const BackwardArgs& a, kern::AttnParams& p, const std::string& arch) {
  if (!sm90_backward_requested()) return false;
  std::string why;
  if (!sm90_backward_supported(arch, p, &why)) return sm90_decline(why);
  const DType t = a.fwd.q.dtype;
  try {
    encode_sm90_backward_maps(&p, t);
  } catch (const Error& e) {  // e.g. a stride layout the driver's TMA encoder rejects
    return sm90_decline(std::string("backward: ") + e.what());
  }
  const std::optional<KernelSetKey> call_key =
      sm90_bwd_call_key(t, p.D, p.Dv, arch, a.deterministic, !a.fwd.variant->mask_mod.empty());
  if (!call_key)
    return sm90_decline("backward: head dims D=" + num(p.D) + ", Dv=" + num(p.Dv) +
                        " pad onto the wide kernel, which has no ordered dQ reductions for deterministic mode");
  const KernelSetKey& key = *call_key;
  const int kd = key.d, kdv = key.dv;
  const bool padded = kd != p.D || kdv != p.Dv;
  const KernelSet& set = get_kernel_set(*a.fwd.variant, key);
  fill_mod_params(set.layout, a.fwd.bindings, true, &p.mod);
  // Deterministic mode: the bulk dQ paths of the non-persistent kernel add dQ themselves, in a fixed order
  // (kernels/sm90/bwd_dq_order_sm90.h); the others leave dQ to the sm80 family's dQ pass.
  const bool ordered = a.deterministic && sm90_bwd_orders_dq(set);
  const BackwardWorkspace w = backward_workspace(p.B, p.Hq, p.L, p.D, a.deterministic);
  char* const ws = static_cast<char*>(a.workspace);
  if (ordered) {
    p.dq_accum = reinterpret_cast<float*>(ws + w.accum);
    p.dq_sem = reinterpret_cast<int*>(ws + w.sem);
  }
  // The shared-memory size follows the dQ path and the v2 choice the set was compiled with
  // (get_kernel_set may have fallen back from the bulk path).
  if (set.sm90_bwd_dq_tma && p.dq_accum != nullptr) {
    try {
      encode_sm90_dq_accum_map(&p, kd);
    } catch (const Error& e) {
      if (ordered) p.dq_accum = nullptr, p.dq_sem = nullptr;  // the sm80 family's deterministic mode: its dQ pass
      return sm90_decline(std::string("backward: ") + e.what());
    }
  }
  // FLEXATTN_SM90_BWD_TMA_STORE (default on): dK / dV leave through TMA stores from the freed K / V slabs (not the
  // persistent kernel, whose K / V slabs take its next work tile).
  p.dkv_tma = set.sm90_bwd_tma_store && sm90_bwd_tma_store_requested() && encode_sm90_dkv_maps(&p, t) ? 1 : 0;
  // Padded dims need those stores (the pair-by-pair ones write the kernel's columns), and deterministic mode the
  // ordered reductions (the sm80 dQ pass would run at the kernel's dims).
  if (padded && (!p.dkv_tma || (a.deterministic && !ordered))) {
    if (ordered) p.dq_accum = nullptr, p.dq_sem = nullptr;
    return sm90_decline("backward: head dims D=" + num(p.D) + ", Dv=" + num(p.Dv) + " pad onto the " + num(kd) + " / " +
                        num(kdv) + " kernel only with its TMA dK / dV stores" +
                        (a.deterministic ? " and ordered dQ reductions" : "") + " (FLEXATTN_SM90_BWD_TMA_STORE, " +
                        "FLEXATTN_SM90_BWD_ORDERED_DQ)");
  }
  // FLEXATTN_SM90_BWD_DQ_CLAIM: the TMA dQ writers store the first partial of each query tile, so the preprocess
  // leaves the accumulator uncleared (kernels/sm90/bwd_dq_claim_sm90.cuh). Only where every dQ write goes through
  // them: the set's kernels were compiled with the TMA reductions, and this kernel adds dQ (p.dq_accum).
  if (set.sm90_bwd_dq_tma && p.dq_accum != nullptr && sm90_bwd_dq_claim_requested(a.deterministic)) {
    p.dq_claim = reinterpret_cast<int*>(ws + w.claim);
    p.dq_claim_max_kv = sm90_bwd_dq_claim_max_kv();
  }
  kern::Sm90Launch l = kern::sm90_bwd_launch(kd, kdv, p.Bkv, p.Hkv, p.S, set.sm90_dq_bulk, set.sm90_bwd_v2,
                                             set.sm90_bwd_dq_tma);
  if (set.sm90_bwd_persistent) {
    // One CTA per SM (FLEXATTN_SM90_PERSISTENT_CTAS caps it, as for the forward), at most one per work
    // tile; the forward's tile queue word of this stream (left at 0 by every launch, so the forward and
    // the backward on one stream share it in turn).
    l = kern::sm90_bwd_persistent_launch(kd, kdv, p.Bkv, p.Hkv, p.S,
                                         sm90_persistent_ctas(jit::device_props(a.fwd.device).sm_count),
                                         set.sm90_dq_bulk, set.sm90_bwd_v2, set.sm90_bwd_dq_tma);
    p.tile_queue = sm90_tile_queue(a.fwd.device, a.fwd.stream);
    p.bwd_head_group = sm90_bwd_persistent_head_group(p);
  } else {
    if (ordered) p.bwd_kv_flip = int(l.grid_x) - 1;  // kv tiles in descending launch order (bwd_dq_order_sm90.h)
    // FLEXATTN_SM90_BWD_HEAD_GROUPS (default: with a block mask or deterministic): kv-tile-major launch order inside
    // L2-sized groups of (kv head, kv batch) pairs (kernels/sm90/tile_config_sm90_bwd.h, sm90_bwd_grid_tile).
    p.bwd_head_group = sm90_bwd_launch_head_group(p, a.deterministic, set.sm90_bwd_grid_order);
    // FLEXATTN_SM90_BWD_CTA_ORDER (default on): the short CTAs of a block mask deferred to the launch's end, in the
    // workspace after the backward's regions (bwd_cta_order_offset). Not in deterministic mode: the ordered dQ
    // reductions rely on the descending launch.
    if (set.sm90_bwd_grid_order && !kern::sm90_bwd_wide(kd, kdv) && !a.deterministic && p.q_num_blocks != nullptr &&
        sm90_bwd_cta_order_requested())
      p.bwd_cta_order = reinterpret_cast<const int*>(ws + bwd_cta_order_offset(w));
  }
  launch_backward(*a.fwd.variant, set, p, launch_config(l, a.fwd.stream), a.deterministic && !ordered,
                  a.fwd.stream);
  if (ordered && jit::env_flag("FLEXATTN_JIT_DEBUG")) {
    // The abandon word (kernels/sm90/bwd_dq_order_sm90.cuh): set when a wait ran past its timeout, or a writer met a
    // tile out of the rank ring's order (bwd_dq_rank_sm90.cuh; never expected). Only read under the debug switch: it
    // costs a stream synchronization.
    const auto& d = jit::driver();
    jit::cu_check(d.cuStreamSynchronize(static_cast<jit::CUstream>(a.fwd.stream)), "cuStreamSynchronize");
    int abandoned = 0;
    const int* word = p.dq_sem + kern::sm90::bwd_dq_semaphores(p.B, p.Hq, p.L) - 1;
    jit::cu_check(d.cuMemcpyDtoH(&abandoned, reinterpret_cast<jit::CUdeviceptr>(word), sizeof abandoned), "cuMemcpyDtoH");
    if (abandoned != 0)
      std::fprintf(stderr,
                   "[flexattn sm90] backward: the deterministic dQ order was abandoned (a wait past %.0f s: block lists "
                   "that are not each other's transpose? or a dQ tile out of the rank ring's order): dq is correct but "
                   "not bitwise reproducible\n",
                   double(kern::sm90::kDqOrderTimeoutNs) * 1e-9);
  }
  return true;
}

}  // namespace flexattn::runtime
