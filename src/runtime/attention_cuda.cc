// The cuda backend's C++ API: validation, AttnParams filling and launches of the sm80 kernel family.
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "common/params.h"
#include "flexattn/attention.h"
#include "flexattn/error.h"
#include "flexattn/tensor.h"
#include "flexattn/jit.h"
#include "jit/device.h"
#include "jit/module.h"
#include "jit/sys.h"
#include "runtime/decode_hook.h"
#include "runtime/exact_grads.h"
#include "runtime/kernel_set.h"
#include "runtime/sm90_backward.h"
#include "runtime/sm90_tile_queue.h"
#include "runtime/tma_sm90.h"
#include "sm80/tile_config.h"
#include "sm90/tile_config_sm90.h"
#include "sm90/bwd_dq_order_sm90.h"
#include "sm90/tile_config_sm90_bwd.h"

namespace flexattn {

namespace {

using kern::AttnParams;

// The mask block size that means "no block mask": a multiple of every compute tile.
constexpr int kNoMaskBlock = 1 << 30;

std::vector<int64_t> strides_of(const TensorView& t) {
  if (!t.strides.empty()) return t.strides;
  std::vector<int64_t> s(t.shape.size(), 1);
  for (int i = int(t.shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * t.shape[i + 1];
  return s;
}

// Checks rank, shape, dtype, contiguity of the last dim and the 16-byte alignment the kernels'
// vector loads need; returns the (b, h, l) strides.
void check_view(const TensorView& t, const char* name, const std::vector<int64_t>& want, DType dtype, int64_t s[3]) {
  if (t.data == nullptr) throw Error(std::string(name) + ": no data pointer");
  if (t.shape.size() != 4) throw Error(std::string(name) + ": expected a 4-D tensor, got shape " + shape_string(t.shape));
  if (t.shape != want)
    throw Error(std::string(name) + ": expected shape " + shape_string(want) + ", got " + shape_string(t.shape));
  if (t.dtype != dtype)
    throw Error(std::string(name) + ": expected dtype " + std::string(dtype_name(dtype)) + ", got " +
                std::string(dtype_name(t.dtype)));
  const std::vector<int64_t> st = strides_of(t);
  if (st.size() != 4) throw Error(std::string(name) + ": strides must have 4 entries");
  if (st[3] != 1) throw Error(std::string(name) + ": the last dimension must be contiguous (stride 1)");
  for (int i = 0; i < 3; ++i)
    if (st[i] % 8 != 0)
      throw Error(std::string(name) + ": strides must be multiples of 8 elements (16-byte rows), got " + shape_string(st));
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0) throw Error(std::string(name) + ": data must be 16-byte aligned");
  for (int i = 0; i < 3; ++i) s[i] = st[i];
}

struct Problem {
  int64_t B, Hq, Hkv, Bkv, L, S, D, Dv;
};

Problem check_forward(const ForwardArgs& a, AttnParams* p) {
  if (a.variant == nullptr) throw Error("variant: null");
  const TensorView& q = a.q;
  if (q.shape.size() != 4) throw Error("q: expected a 4-D tensor [B, Hq, L, D], got shape " + shape_string(q.shape));
  if (a.k.shape.size() != 4) throw Error("k: expected a 4-D tensor [Bkv, Hkv, S, D], got shape " + shape_string(a.k.shape));
  if (a.v.shape.size() != 4) throw Error("v: expected a 4-D tensor [Bkv, Hkv, S, Dv], got shape " + shape_string(a.v.shape));
  Problem pr{q.shape[0], q.shape[1], a.k.shape[1], a.k.shape[0], q.shape[2], a.k.shape[2], q.shape[3], a.v.shape[3]};
  if (q.dtype != DType::BF16 && q.dtype != DType::F16)
    throw Error("q: the cuda backend takes bf16 or f16, got " + std::string(dtype_name(q.dtype)));
  if (pr.B < 1 || pr.Hq < 1 || pr.L < 1 || pr.D < 1) throw Error("q: every dimension must be at least 1, got " + shape_string(q.shape));
  if (pr.Hkv < 1 || pr.S < 1) throw Error("k: every dimension must be at least 1, got " + shape_string(a.k.shape));
  if (pr.Bkv != pr.B && pr.Bkv != 1)
    throw Error("k: batch must equal q's batch (" + std::to_string(pr.B) + ") or be 1, got " + std::to_string(pr.Bkv));
  if (pr.Hq % pr.Hkv != 0)
    throw Error("k: the number of query heads (" + std::to_string(pr.Hq) + ") must be a multiple of the kv heads (" +
                std::to_string(pr.Hkv) + ")");
  if (pr.D % 16 != 0 || pr.Dv % 16 != 0 || pr.D > 256 || pr.Dv > 256)
    throw Error("head dims: the cuda backend takes multiples of 16 up to 256, got D=" + std::to_string(pr.D) +
                ", Dv=" + std::to_string(pr.Dv));
  if (product_exceeds(int64_t(1) << 31, {pr.B, pr.Hq, pr.L}))
    throw Error("q: expected B * Hq * L <= 2^31 rows (32-bit row indices), got shape " + shape_string(q.shape));
  if (product_exceeds(int64_t(1) << 31, {pr.Bkv, pr.Hkv, pr.S}))
    throw Error("k: expected Bkv * Hkv * S <= 2^31 rows (32-bit row indices), got shape " + shape_string(a.k.shape));
  int64_t s[3];
  check_view(q, "q", {pr.B, pr.Hq, pr.L, pr.D}, q.dtype, s);
  p->q = q.data, p->q_sb = s[0], p->q_sh = s[1], p->q_sl = s[2];
  check_view(a.k, "k", {pr.Bkv, pr.Hkv, pr.S, pr.D}, q.dtype, s);
  p->k = a.k.data, p->k_sb = s[0], p->k_sh = s[1], p->k_sl = s[2];
  check_view(a.v, "v", {pr.Bkv, pr.Hkv, pr.S, pr.Dv}, q.dtype, s);
  p->v = a.v.data, p->v_sb = s[0], p->v_sh = s[1], p->v_sl = s[2];
  check_view(a.out, "out", {pr.B, pr.Hq, pr.L, pr.Dv}, q.dtype, s);
  p->out = a.out.data, p->out_sb = s[0], p->out_sh = s[1], p->out_sl = s[2];
  for (const auto& [name, off, len] : {std::tuple{"q_offset", a.q_offset, pr.L}, {"kv_offset", a.kv_offset, pr.S}})
    // Never negative, as FlexAttention's own indices: generated gathers indexed by a position clamp it from above
    // only (codegen's fa_clamp_position32).
    if (off < 0 || off > (int64_t(1) << 30) - len)  // not off + len: a huge off wraps it
      throw Error(std::string(name) + ": the positions the mods see are offset + row, in [0, 2^30): expected 0 <= "
                  "offset and offset + length <= 2^30, got " + std::to_string(off) + " + " + std::to_string(len));
  p->q_offset = int(a.q_offset);
  p->kv_offset = int(a.kv_offset);
  p->lse = a.lse;
  p->max_score = a.max_score;
  p->B = int(pr.B), p->Hq = int(pr.Hq), p->Hkv = int(pr.Hkv), p->Bkv = int(pr.Bkv);
  p->L = int(pr.L), p->S = int(pr.S), p->D = int(pr.D), p->Dv = int(pr.Dv);
  check(std::isnan(a.scale) || std::isfinite(a.scale), "scale: expected a finite number (NaN = 1/sqrt(D)), got " +
                                                           std::to_string(a.scale));
  const double scale = std::isnan(a.scale) ? 1.0 / std::sqrt(double(pr.D)) : a.scale;
  p->scale = float(scale);

  if (const DeviceBlockMask* m = a.block_mask) {
    if (m->q_len != pr.L || m->kv_len != pr.S)
      throw Error("block_mask was built for q_len=" + std::to_string(m->q_len) + ", kv_len=" + std::to_string(m->kv_len) +
                  "; got q_len=" + std::to_string(pr.L) + ", kv_len=" + std::to_string(pr.S) +
                  " (create a new block mask)");
    if (m->B != 1 && m->B != pr.B)
      throw Error("block_mask: batch must be 1 or " + std::to_string(pr.B) + ", got " + std::to_string(m->B));
    if (m->H != 1 && m->H != pr.Hq)
      throw Error("block_mask: heads must be 1 or " + std::to_string(pr.Hq) + ", got " + std::to_string(m->H));
    if (m->kv_num_blocks == nullptr || m->kv_indices == nullptr)
      throw Error("block_mask: kv_num_blocks and kv_indices are required");
    if (m->q_block < 1 || m->kv_block < 1)
      throw Error("block_mask: expected q_block and kv_block >= 1, got " + std::to_string(m->q_block) + " and " +
                  std::to_string(m->kv_block));
    const int64_t nq = (pr.L + m->q_block - 1) / m->q_block, nkv = (pr.S + m->kv_block - 1) / m->kv_block;
    if (m->nq != nq || m->nkv != nkv)
      throw Error("block_mask: nq/nkv do not match the lengths and block sizes");
    p->kv_num_blocks = m->kv_num_blocks, p->kv_indices = m->kv_indices;
    p->full_kv_num_blocks = m->full_kv_num_blocks, p->full_kv_indices = m->full_kv_indices;
    p->q_num_blocks = m->q_num_blocks, p->q_indices = m->q_indices;
    p->full_q_num_blocks = m->full_q_num_blocks, p->full_q_indices = m->full_q_indices;
    p->mask_B = int(m->B), p->mask_H = int(m->H), p->nq = int(nq), p->nkv = int(nkv);
    p->q_block = m->q_block, p->kv_block = m->kv_block;
    // FLEXATTN_SM90_ROW_ORDER: the sm90 forward's tile order follows q_order (auto: where q_order_on says so).
    const runtime::Sm90RowOrder order = runtime::sm90_row_order_mode();
    if (order != runtime::Sm90RowOrder::off) p->q_order = m->q_order;
    if (order == runtime::Sm90RowOrder::automatic) p->q_order_on = m->q_order_on;
  } else {
    p->mask_B = p->mask_H = 1;
    p->nq = p->nkv = 1;
    p->q_block = p->kv_block = kNoMaskBlock;
  }
  return pr;
}

void check_mask_blocks(const AttnParams& p, const Problem& pr, bool backward) {
  if (p.kv_num_blocks == nullptr) return;
  if (!kern::sm80_mask_blocks_ok(int(pr.D), int(pr.Dv), p.q_block, p.kv_block, backward))
    throw Error("block_mask: BLOCK_SIZE (" + std::to_string(p.q_block) + ", " + std::to_string(p.kv_block) +
                ") must be a multiple of the kernel's compute tile (" +
                std::to_string(kern::sm80_fwd_tile(int(pr.D), int(pr.Dv)).block_m) + ", " +
                std::to_string(kern::sm80_fwd_tile(int(pr.D), int(pr.Dv)).block_n) +
                "); use 128 or a multiple of it");
  if (backward && p.q_num_blocks == nullptr)
    throw Error("block_mask: the backward needs q_num_blocks / q_indices (the transposed lists)");
  // The backward walks the transposed lists and orders its deterministic dQ by the kv lists: full blocks in
  // one set only would make the two disagree.
  const bool full_kv = p.full_kv_num_blocks != nullptr && p.full_kv_indices != nullptr;
  const bool full_q = p.full_q_num_blocks != nullptr && p.full_q_indices != nullptr;
  if (backward && full_kv != full_q)
    throw Error(std::string("block_mask: the backward needs full_kv_num_blocks / full_kv_indices and full_q_num_blocks / "
                            "full_q_indices together (got only the ") + (full_kv ? "kv" : "q") + " ones)");
}

// Makes `device` current and returns its (cached) properties.
const jit::DeviceProps& current_device(int device) {
  jit::use_device(device);
  return jit::device_props(device);
}

std::string device_arch(int device) { return current_device(device).arch; }

// Hopper path (default on sm_90a; FLEXATTN_SM90=0 switches it off): used where the sm90 forward supports
// the problem, else the sm80 family runs. Checked on the H200: 216 gpu_attention_check cases, 0 failed.
bool try_sm90_forward(const ForwardArgs& a, AttnParams& p, const std::string& arch) {
  if (!runtime::sm90_forward_requested()) return false;
  // Head dims and arch first (no compile); the mask-block rule depends on the tile the variant gets.
  std::string why;
  if (!runtime::sm90_forward_supported(arch, p, true, &why)) return runtime::sm90_decline(why);
  const runtime::KernelSet& set = runtime::get_kernel_set(
      *a.variant, runtime::sm90_fwd_call_key(a.q.dtype, p.D, p.Dv, arch, p.kv_num_blocks != nullptr));
  // The kernel's own tile and form, as its source was generated (not the switches read again).
  const bool narrow = set.sm90_fwd.narrow, tall = set.sm90_fwd.tall, persistent = set.sm90_fwd.persistent;
  if (!runtime::sm90_forward_supported(arch, p, narrow, &why)) return runtime::sm90_decline(why);
  try {
    runtime::encode_sm90_forward_maps(&p, a.q.dtype, narrow, set.key.d, set.key.dv);
  } catch (const Error& e) {  // e.g. a stride layout the driver's TMA encoder rejects
    return runtime::sm90_decline(e.what());
  }
  runtime::fill_mod_params(set.layout, a.bindings, false, &p.mod);
  const kern::Sm90Launch l = kern::sm90_fwd_launch(set.key.d, set.key.dv, narrow, p.B, p.Hq, p.L,
                                                   runtime::sm90_persistent_ctas(current_device(a.device).sm_count),
                                                   persistent, tall, set.sm90_fwd.rel_diag);
  // The persistent kernel's tile queue (kernels/sm90/fwd_scheduler_sm90.cuh); null: static stride.
  p.tile_queue = persistent ? runtime::sm90_tile_queue(a.device, a.stream) : nullptr;
  jit::launch(jit::get_function(set.compiled, "flexattn_fwd"), runtime::launch_config(l, a.stream), p);
  return true;
}

}  // namespace

void cuda_forward(const ForwardArgs& a) {
  AttnParams p{};
  const Problem pr = check_forward(a, &p);
  const std::string arch = device_arch(a.device);
  if (runtime::try_decode_forward(a, p, arch)) return;  // L <= 64: split-KV decode family (FLEXATTN_DECODE=0 opts out)
  if (try_sm90_forward(a, p, arch)) return;
  check_mask_blocks(p, pr, false);
  runtime::KernelSetKey key{a.q.dtype, int(pr.D), int(pr.Dv), arch, false};
  const runtime::KernelSet& set = runtime::get_kernel_set(*a.variant, key);
  runtime::fill_mod_params(set.layout, a.bindings, false, &p.mod);
  jit::CUfunction f = jit::get_function(set.compiled, "flexattn_fwd");
  jit::launch(f, runtime::launch_config(kern::sm80_fwd_launch(p.D, p.Dv, p.B, p.Hq, p.L), a.stream), p);
}

namespace {
// The backward's own regions (runtime::backward_workspace); deterministic mode's exact buffer-gradient accumulators
// (runtime/exact_grads.h) follow from the next 256-byte boundary.
size_t base_workspace_bytes(const BackwardArgs& a) {
  const auto& shape = a.fwd.q.shape;
  if (shape.size() != 4) return runtime::backward_workspace(0, 0, 0, 0, a.deterministic).bytes;
  const runtime::BackwardWorkspace w = runtime::backward_workspace(shape[0], shape[1], shape[2], shape[3], a.deterministic);
  // The sm90 backward's deferred launch order (FLEXATTN_SM90_BWD_CTA_ORDER) after it: k is [Bkv, Hkv, S, D].
  // A size without k's would be too small for the call (session 35: the Python and ring callers passed q alone).
  const auto& k = a.fwd.k.shape;
  if (k.size() != 4)
    throw Error("fwd.k: backward_workspace_bytes needs k's shape [Bkv, Hkv, S, D] as well as q's, got " +
                std::to_string(k.size()) + " dims");
  return runtime::bwd_cta_order_offset(w) + runtime::bwd_cta_order_bytes(k[2], k[1], k[0]);
}
size_t exact_grads_offset(const BackwardArgs& a) { return (base_workspace_bytes(a) + 255) / 256 * 256; }

void run_backward(const BackwardArgs& a, AttnParams& p, const Problem& pr, char* ws, const std::string& arch) {
  const DType t = a.fwd.q.dtype;
  p.delta = reinterpret_cast<float*>(ws);
  // Deterministic mode: no accumulator unless the sm90 backward takes its ordered dQ reductions
  // (try_sm90_backward sets dq_accum and dq_sem from the workspace then).
  p.dq_accum = a.deterministic ? nullptr : reinterpret_cast<float*>(ws + runtime::backward_workspace(pr.B, pr.Hq, pr.L, pr.D, false).accum);
  if (runtime::try_sm90_backward(a, p, arch)) return;  // FLEXATTN_SM90_BWD=0 opts out

  runtime::KernelSetKey key{t, int(pr.D), int(pr.Dv), arch, true};
  const runtime::KernelSet& set = runtime::get_kernel_set(*a.fwd.variant, key);
  runtime::fill_mod_params(set.layout, a.fwd.bindings, true, &p.mod);
  runtime::launch_backward(*a.fwd.variant, set, p,
                           runtime::launch_config(kern::sm80_bwd_launch(p.D, p.Dv, p.Bkv, p.Hkv, p.S), a.fwd.stream),
                           a.deterministic, a.fwd.stream);
}
}  // namespace

size_t backward_workspace_bytes(const BackwardArgs& a) {
  const size_t exact = runtime::exact_grad_bytes(a);
  return exact == 0 ? base_workspace_bytes(a) : exact_grads_offset(a) + exact;
}

void cuda_backward(const BackwardArgs& a) {
  AttnParams p{};
  const Problem pr = check_forward(a.fwd, &p);
  check_mask_blocks(p, pr, true);
  runtime::check_backward_head_dims(pr.D, pr.Dv);
  if (a.fwd.lse == nullptr) throw Error("lse: the backward needs the forward's lse");
  int64_t s[3];
  const DType t = a.fwd.q.dtype;
  check_view(a.dout, "dout", {pr.B, pr.Hq, pr.L, pr.Dv}, t, s);
  p.dout = a.dout.data, p.dout_sb = s[0], p.dout_sh = s[1], p.dout_sl = s[2];
  check_view(a.dq, "dq", {pr.B, pr.Hq, pr.L, pr.D}, t, s);
  p.dq = a.dq.data, p.dq_sb = s[0], p.dq_sh = s[1], p.dq_sl = s[2];
  check_view(a.dk, "dk", {pr.Bkv, pr.Hkv, pr.S, pr.D}, t, s);
  p.dk = a.dk.data, p.dk_sb = s[0], p.dk_sh = s[1], p.dk_sl = s[2];
  check_view(a.dv, "dv", {pr.Bkv, pr.Hkv, pr.S, pr.Dv}, t, s);
  p.dv = a.dv.data, p.dv_sb = s[0], p.dv_sh = s[1], p.dv_sl = s[2];
  p.dlse = a.dlse;
  p.deterministic = a.deterministic ? 1 : 0;
  const size_t need = backward_workspace_bytes(a);
  if (a.workspace == nullptr || a.workspace_bytes < need)
    throw Error("workspace: the backward needs " + std::to_string(need) + " bytes (backward_workspace_bytes), got " +
                std::to_string(a.workspace_bytes));
  if (reinterpret_cast<uintptr_t>(a.workspace) % 16 != 0) throw Error("workspace: must be 16-byte aligned");
  // fp32 accumulators: 4-byte aligned (the kernels read a pointer with its low bit set as deterministic mode's exact
  // accumulators, so a misaligned one must not reach them).
  for (const auto& [name, g] : a.fwd.bindings.buffer_grads)
    if (reinterpret_cast<uintptr_t>(g) % 4 != 0)
      throw Error("buffer_grads['" + name + "']: must be a 4-byte aligned float32 accumulator");
  char* ws = static_cast<char*>(a.workspace);
  // Deterministic mode with learnable buffers: the kernels add their gradients into exact accumulators in the
  // workspace (a copy of the args points the bindings there); finish_exact_grads rounds them into the caller's.
  // device_arch makes the call's device current before the first driver call (the accumulators' memset).
  const std::string arch = device_arch(a.fwd.device);
  BackwardArgs exact_args;
  runtime::ExactGrads exact;
  const bool exact_sums = runtime::exact_grad_bytes(a) != 0;
  if (exact_sums) {
    exact_args = a;
    exact = runtime::begin_exact_grads(exact_args, ws + exact_grads_offset(a), arch);
  }
  run_backward(exact_sums ? exact_args : a, p, pr, ws, arch);
  runtime::finish_exact_grads(exact, a.fwd.stream);
}

CompileReport compile_variant(const Variant& variant, DType dtype, int head_dim, int value_head_dim,
                              const std::string& arch, bool backward, bool portable, bool deterministic,
                              bool block_mask) {
  runtime::KernelSetKey key{dtype, head_dim, value_head_dim, arch, backward};
  // The family try_sm90_forward / try_sm90_backward choose, by their own rules (a call's block sizes or strides
  // can still send it to the sm80 family).
  kern::AttnParams p{};
  p.D = head_dim, p.Dv = value_head_dim, p.scale = 1.f;
  const bool hopper =
      !portable && (dtype == DType::BF16 || dtype == DType::F16) &&
      (backward ? runtime::sm90_backward_requested() && runtime::sm90_backward_supported(arch, p, nullptr)
                : runtime::sm90_forward_requested() && runtime::sm90_forward_supported(arch, p, true, nullptr));
  if (hopper && backward) {  // try_sm90_backward's key (none: the call declines to the sm80 family)
    const std::optional<runtime::KernelSetKey> k = runtime::sm90_bwd_call_key(
        dtype, head_dim, value_head_dim, arch, deterministic, !variant.mask_mod.empty());
    if (k) key = *k;
  }
  if (hopper && !backward) key = runtime::sm90_fwd_call_key(dtype, head_dim, value_head_dim, arch, block_mask);
  const runtime::KernelSet& set = runtime::get_kernel_set(variant, key);
  CompileReport r = runtime::compile_report(set);
  // Deterministic mode needs the sm80 dQ pass unless the sm90 set orders its own dQ reductions.
  if (backward && deterministic && !runtime::sm90_bwd_orders_dq(set)) {
    const CompileReport dq = runtime::compile_report(runtime::get_kernel_set(variant, runtime::dq_pass_key(key)));
    r.registers.insert(dq.registers.begin(), dq.registers.end());
    r.spill_bytes.insert(dq.spill_bytes.begin(), dq.spill_bytes.end());
  }
  // Deterministic mode's buffer gradients: the kernel that rounds their exact sums (runtime/exact_grads.h).
  if (backward && deterministic && !variant.grad_buffers.empty()) runtime::add_to_report(r, runtime::exact_grads_kernel(arch));
  return r;
}

HeadDims cuda_padded_head_dims(int d, int dv) {
  if (d < 1 || dv < 1 || d > 256 || dv > 256)
    throw Error("head dims: expected 1..256, got D=" + std::to_string(d) + ", Dv=" + std::to_string(dv));
  return HeadDims{kern::sm80_padded_head_dim(d, dv, 0), kern::sm80_padded_head_dim(d, dv, 1)};
}

std::string cuda_device_arch(int device) { return device_arch(device); }

bool cuda_available(std::string* why) {
  try {
    const jit::JitInfo info = jit::jit_info();
    if (!info.driver_found) {
      if (why) *why = info.driver_error.empty() ? "no CUDA driver" : info.driver_error;
      return false;
    }
    if (info.devices.empty()) {
      if (why) *why = "the CUDA driver reports no device";
      return false;
    }
    if (!info.nvrtc_found) {
      if (why) *why = info.nvrtc_error.empty() ? "NVRTC not found" : info.nvrtc_error;
      return false;
    }
    return true;
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return false;
  }
}

}  // namespace flexattn
