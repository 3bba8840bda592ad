// The cuda backend over raw device pointers (torch tensors' data_ptr()), and the GPU BlockMask builder.
// Nothing here allocates device memory for attention: outputs, lse/max, gradients and the backward's
// workspace come from the caller (torch's allocator), and kernels run on the caller's stream.
#include <limits>

#include "convert.h"
#include "flexattn/attention.h"
#include "flexattn/block_mask_gpu.h"
#include "flexattn/decode.h"
#include "flexattn/error.h"
#include "flexattn/jit.h"
#include "jit/nvrtc.h"

namespace flexattn::py {

namespace {

// (data_ptr, dtype, shape, strides in elements)
using TensorArg = std::tuple<uintptr_t, std::string, std::vector<int64_t>, std::vector<int64_t>>;
// (data_ptr, dtype, shape): a contiguous captured buffer on the device
using BufferArg = std::tuple<uintptr_t, std::string, std::vector<int64_t>>;
// (q_len, kv_len, q_block, kv_block, [8 data_ptrs in torch's as_tuple order, 0 = absent], B, H, nq, nkv)
using DeviceMaskArg = std::tuple<int64_t, int64_t, int, int, std::vector<uintptr_t>, int64_t, int64_t, int64_t,
                                 int64_t>;
using Scalars = std::map<std::string, double>;
using Buffers = std::map<std::string, BufferArg>;

TensorView view_of(const TensorArg& a, const std::string& what) {
  TensorView v;
  v.data = reinterpret_cast<void*>(std::get<0>(a));
  v.dtype = parse_dtype_arg(std::get<1>(a), what);
  v.shape = std::get<2>(a);
  v.strides = std::get<3>(a);
  check(v.strides.empty() || v.strides.size() == v.shape.size(),
        what + ": strides and shape have different lengths");
  return v;
}

DeviceBindings device_bindings(const Scalars& scalars, const Buffers& buffers) {
  DeviceBindings b;
  b.scalars = scalars;
  for (const auto& [name, arg] : buffers) {
    const auto& [ptr, dtype, shape] = arg;
    check(ptr != 0, "buffer '" + name + "': null data pointer");
    b.buffers[name] = ir::BufferView{parse_dtype_arg(dtype, "buffer '" + name + "'"), shape,
                                     reinterpret_cast<const void*>(ptr)};
  }
  return b;
}

DeviceBlockMask device_mask(const DeviceMaskArg& a) {
  const auto& [q_len, kv_len, q_block, kv_block, ptrs, B, H, nq, nkv] = a;
  check(ptrs.size() >= 8 && ptrs.size() <= 10,
        "block_mask: expected 8 pointers (kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, "
        "q_num_blocks, q_indices, full_q_num_blocks, full_q_indices) and optionally q_order and q_order_on, got " +
            std::to_string(ptrs.size()));
  auto p = [&](int i) { return reinterpret_cast<const int32_t*>(ptrs[size_t(i)]); };
  check((p(2) == nullptr) == (p(3) == nullptr), "block_mask: full_kv_num_blocks and full_kv_indices must be both "
                                                "given or both absent");
  DeviceBlockMask m;
  m.kv_num_blocks = p(0), m.kv_indices = p(1), m.full_kv_num_blocks = p(2), m.full_kv_indices = p(3);
  m.q_num_blocks = p(4), m.q_indices = p(5), m.full_q_num_blocks = p(6), m.full_q_indices = p(7);
  m.B = B, m.H = H, m.nq = nq, m.nkv = nkv, m.q_len = q_len, m.kv_len = kv_len;
  m.q_block = q_block, m.kv_block = kv_block;
  if (ptrs.size() >= 9) m.q_order = p(8);
  if (ptrs.size() == 10) m.q_order_on = p(9);
  return m;
}

struct Call {
  ForwardArgs fwd;
  DeviceBlockMask mask;
};

void fill_forward(Call* c, const VariantHandle& v, const TensorArg& q, const TensorArg& k, const TensorArg& vv,
                  const TensorArg& out, uintptr_t lse, uintptr_t max_score, const Scalars& scalars,
                  const Buffers& buffers, const std::optional<DeviceMaskArg>& mask, std::optional<double> scale,
                  int device, uintptr_t stream) {
  ForwardArgs& f = c->fwd;
  f.variant = &v.variant;
  f.bindings = device_bindings(scalars, buffers);
  f.q = view_of(q, "query"), f.k = view_of(k, "key"), f.v = view_of(vv, "value"), f.out = view_of(out, "out");
  f.lse = reinterpret_cast<float*>(lse);
  f.max_score = reinterpret_cast<float*>(max_score);
  if (mask) {
    c->mask = device_mask(*mask);
    f.block_mask = &c->mask;
  }
  f.scale = scale ? *scale : std::numeric_limits<double>::quiet_NaN();
  check(device >= 0, "device: must be >= 0, got " + std::to_string(device));
  f.device = device;
  f.stream = reinterpret_cast<void*>(stream);
}

void cuda_forward_py(const VariantHandle& v, const TensorArg& q, const TensorArg& k, const TensorArg& vv,
                     const TensorArg& out, uintptr_t lse, uintptr_t max_score, const Scalars& scalars,
                     const Buffers& buffers, const std::optional<DeviceMaskArg>& mask, std::optional<double> scale,
                     int device, uintptr_t stream) {
  Call c;
  fill_forward(&c, v, q, k, vv, out, lse, max_score, scalars, buffers, mask, scale, device, stream);
  nb::gil_scoped_release release;
  cuda_forward(c.fwd);
}

void cuda_backward_py(const VariantHandle& v, const TensorArg& q, const TensorArg& k, const TensorArg& vv,
                      const TensorArg& out, uintptr_t lse, const TensorArg& dout, uintptr_t dlse, const TensorArg& dq,
                      const TensorArg& dk, const TensorArg& dv, const Scalars& scalars, const Buffers& buffers,
                      const std::map<std::string, uintptr_t>& buffer_grads, const std::optional<DeviceMaskArg>& mask,
                      std::optional<double> scale, bool deterministic, uintptr_t workspace, size_t workspace_bytes,
                      int device, uintptr_t stream) {
  Call c;
  fill_forward(&c, v, q, k, vv, out, lse, 0, scalars, buffers, mask, scale, device, stream);
  BackwardArgs b;
  b.fwd = c.fwd;
  for (const auto& [name, ptr] : buffer_grads) {
    check(ptr != 0, "buffer_grads['" + name + "']: null data pointer");
    b.fwd.bindings.buffer_grads[name] = reinterpret_cast<float*>(ptr);
  }
  b.dout = view_of(dout, "grad_out");
  b.dlse = reinterpret_cast<const float*>(dlse);
  b.dq = view_of(dq, "dq"), b.dk = view_of(dk, "dk"), b.dv = view_of(dv, "dv");
  b.deterministic = deterministic;
  b.workspace = reinterpret_cast<void*>(workspace);
  b.workspace_bytes = workspace_bytes;
  nb::gil_scoped_release release;
  cuda_backward(b);
}

// A cuda_decode call (include/flexattn/decode.h) from the same argument forms as cuda_forward; the
// int32 arrays (page_table [B, max_pages], kv_lens [B], q_offsets [B]) are device pointers, 0 = absent.
struct DecodeCall {
  DecodeArgs args;
  DeviceBlockMask mask;  // args.block_mask points here, so a DecodeCall is never copied
  DecodeCall() = default;
  DecodeCall(const DecodeCall&) = delete;
  DecodeCall& operator=(const DecodeCall&) = delete;
};

void fill_decode(DecodeCall* c, const VariantHandle& v, const TensorArg& q, const TensorArg& k, const TensorArg& vv,
                 const TensorArg& out, uintptr_t lse, uintptr_t max_score, const Scalars& scalars,
                 const Buffers& buffers, const std::optional<DeviceMaskArg>& mask, uintptr_t page_table,
                 int64_t max_pages, uintptr_t kv_lens, uintptr_t q_offsets, int64_t q_offset,
                 std::optional<double> scale, int num_splits, int device, uintptr_t stream) {
  DecodeArgs& d = c->args;
  d.variant = &v.variant;
  d.bindings = device_bindings(scalars, buffers);
  d.q = view_of(q, "query"), d.k = view_of(k, "key"), d.v = view_of(vv, "value"), d.out = view_of(out, "out");
  d.lse = reinterpret_cast<float*>(lse);
  d.max_score = reinterpret_cast<float*>(max_score);
  check((page_table == 0) == (max_pages == 0), "page_table: give both page_table and max_pages (paged) or neither");
  d.page_table = reinterpret_cast<const int32_t*>(page_table);
  d.max_pages = max_pages;
  d.kv_lens = reinterpret_cast<const int32_t*>(kv_lens);
  d.q_offsets = reinterpret_cast<const int32_t*>(q_offsets);
  d.q_offset = q_offset;
  if (mask) {
    c->mask = device_mask(*mask);
    d.block_mask = &c->mask;
  }
  d.scale = scale ? *scale : std::numeric_limits<double>::quiet_NaN();
  d.num_splits = num_splits;
  check(device >= 0, "device: must be >= 0, got " + std::to_string(device));
  d.device = device;
  d.stream = reinterpret_cast<void*>(stream);
}

size_t cuda_decode_workspace_bytes_py(const VariantHandle& v, const TensorArg& q, const TensorArg& k,
                                      const TensorArg& vv, const TensorArg& out, uintptr_t lse, uintptr_t max_score,
                                      const Scalars& scalars, const Buffers& buffers,
                                      const std::optional<DeviceMaskArg>& mask, uintptr_t page_table,
                                      int64_t max_pages, uintptr_t kv_lens, uintptr_t q_offsets, int64_t q_offset,
                                      std::optional<double> scale, int num_splits, int device, uintptr_t stream) {
  DecodeCall c;
  fill_decode(&c, v, q, k, vv, out, lse, max_score, scalars, buffers, mask, page_table, max_pages, kv_lens,
              q_offsets, q_offset, scale, num_splits, device, stream);
  nb::gil_scoped_release release;  // the first query compiles the kernels
  return decode_workspace_bytes(c.args);
}

void cuda_decode_py(const VariantHandle& v, const TensorArg& q, const TensorArg& k, const TensorArg& vv,
                    const TensorArg& out, uintptr_t lse, uintptr_t max_score, const Scalars& scalars,
                    const Buffers& buffers, const std::optional<DeviceMaskArg>& mask, uintptr_t page_table,
                    int64_t max_pages, uintptr_t kv_lens, uintptr_t q_offsets, int64_t q_offset,
                    std::optional<double> scale, int num_splits, uintptr_t workspace, size_t workspace_bytes,
                    int device, uintptr_t stream) {
  DecodeCall c;
  fill_decode(&c, v, q, k, vv, out, lse, max_score, scalars, buffers, mask, page_table, max_pages, kv_lens,
              q_offsets, q_offset, scale, num_splits, device, stream);
  c.args.workspace = reinterpret_cast<void*>(workspace);
  c.args.workspace_bytes = workspace_bytes;
  nb::gil_scoped_release release;
  cuda_decode(c.args);
}

size_t workspace_bytes_py(const std::vector<int64_t>& q_shape, const std::vector<int64_t>& k_shape, bool deterministic,
                          const std::map<std::string, std::vector<int64_t>>& buffer_grad_shapes) {
  check(q_shape.size() == 4, "q_shape: expected [B, Hq, L, E]");
  // The Hopper backward's launch order takes two ints per CTA, one CTA per kv tile of each kv head.
  check(k_shape.size() == 4, "k_shape: expected [Bkv, Hkv, S, E]");
  BackwardArgs b;
  b.fwd.q.shape = q_shape;
  b.fwd.k.shape = k_shape;
  b.deterministic = deterministic;
  for (const auto& [name, shape] : buffer_grad_shapes) {  // deterministic mode's exact accumulators
    b.fwd.bindings.buffers[name].shape = shape;
    b.fwd.bindings.buffer_grads[name] = nullptr;
  }
  return backward_workspace_bytes(b);
}

// The GPU builder's arrays as DLPack tensors that keep the device memory alive.
nb::tuple build_mask_gpu(const std::optional<Mod>& mask_mod, int64_t B, int64_t H, int64_t q_len, int64_t kv_len,
                         int q_block, int kv_block, const Scalars& scalars, const Buffers& buffers, int device,
                         uintptr_t stream) {
  check(!mask_mod || mask_mod->kind == "mask_mod", "mask_mod: got a score_mod");
  const DeviceBindings bindings = device_bindings(scalars, buffers);
  GpuBlockMask built;
  {
    nb::gil_scoped_release release;
    built = build_block_mask_gpu(mask_mod ? mask_mod->expr : ir::Expr(), bindings, B, H, q_len, kv_len, q_block,
                                 kv_block, device, reinterpret_cast<void*>(stream));
  }
  auto* keep = new GpuBlockMask(built);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<GpuBlockMask*>(p); });
  const DeviceBlockMask& d = keep->view();
  const size_t b = size_t(d.B), h = size_t(d.H), nq = size_t(d.nq), nkv = size_t(d.nkv);
  using Dev = nb::ndarray<nb::pytorch, int32_t, nb::device::cuda>;
  auto arr = [&](const int32_t* p, std::initializer_list<size_t> shape) {
    std::vector<size_t> s(shape);
    // torch has no read-only tensors: the arrays are exported writable, as torch's own BlockMask's are.
    return Dev(const_cast<int32_t*>(p), s.size(), s.data(), owner, nullptr, nb::dtype<int32_t>(),
               nb::device::cuda::value, device);
  };
  return nb::make_tuple(arr(d.kv_num_blocks, {b, h, nq}), arr(d.kv_indices, {b, h, nq, nkv}),
                        arr(d.full_kv_num_blocks, {b, h, nq}), arr(d.full_kv_indices, {b, h, nq, nkv}),
                        arr(d.q_num_blocks, {b, h, nkv}), arr(d.q_indices, {b, h, nkv, nq}),
                        arr(d.full_q_num_blocks, {b, h, nkv}), arr(d.full_q_indices, {b, h, nkv, nq}));
}

nb::tuple cuda_available_py() {
  std::string why;
  const bool ok = cuda_available(&why);
  return nb::make_tuple(ok, why);
}

nb::dict compile_variant_py(const VariantHandle& v, const std::string& dtype, int head_dim, int value_head_dim,
                            const std::string& arch, bool backward, bool portable, bool deterministic,
                            bool block_mask) {
  CompileReport r;
  {
    const DType t = parse_dtype_arg(dtype, "dtype");
    nb::gil_scoped_release release;
    r = compile_variant(v.variant, t, head_dim, value_head_dim, arch, backward, portable, deterministic, block_mask);
  }
  nb::dict d;
  d["key"] = r.key;
  d["registers"] = r.registers;
  d["spill_bytes"] = r.spill_bytes;
  return d;
}

}  // namespace

void bind_cuda(nb::module_& m) {
  m.def(
      "cuda_padded_head_dims",
      [](int d, int dv) {
        const HeadDims h = cuda_padded_head_dims(d, dv);
        return nb::make_tuple(h.d, h.dv);
      },
      nb::arg("d"), nb::arg("dv"),
      "(d', dv'): the smallest head dims >= (d, dv) that every cuda kernel takes (zero-pad to them).");
  m.def(
      "set_python_sites", [](std::vector<std::string> dirs) { jit::set_python_sites(std::move(dirs)); },
      nb::arg("dirs"), "The running Python's site-packages, searched for NVRTC wheels (nvidia/cu13/lib) first.");
  m.def(
      "nvrtc_search_dirs", [] { return jit::nvrtc_search_dirs(jit::NvrtcSearch::from_environment()); },
      "The folders searched for NVRTC, in order (FLEXATTN_NVRTC, when set, is the only place tried instead).");
  m.def("cuda_available", &cuda_available_py,
        "(usable, reason): whether the cuda backend can run here (driver, device, NVRTC).");
  m.def("cuda_forward", &cuda_forward_py, nb::arg("variant"), nb::arg("query"), nb::arg("key"), nb::arg("value"),
        nb::arg("out"), nb::kw_only(), nb::arg("lse") = 0, nb::arg("max_score") = 0, nb::arg("scalars") = Scalars{},
        nb::arg("buffers") = Buffers{}, nb::arg("block_mask").none() = nb::none(),
        nb::arg("scale").none() = nb::none(), nb::arg("device") = 0, nb::arg("stream") = 0,
        "Enqueues the forward on `stream` (a cudaStream_t as int; 0 = legacy default). Tensors are (data_ptr, "
        "dtype, shape, strides): query/key/value/out bf16 or f16, last dim contiguous, other strides multiples of "
        "8; lse / max_score: float32 [B,Hq,L] pointers or 0. buffers: {name: (data_ptr, dtype, shape)}, "
        "contiguous. block_mask: (q_len, kv_len, q_block, kv_block, [8 pointers, 0 = absent], B, H, nq, nkv).");
  m.def("cuda_backward", &cuda_backward_py, nb::arg("variant"), nb::arg("query"), nb::arg("key"), nb::arg("value"),
        nb::arg("out"), nb::arg("lse"), nb::arg("grad_out"), nb::kw_only(), nb::arg("grad_lse") = 0,
        nb::arg("dq"), nb::arg("dk"), nb::arg("dv"), nb::arg("scalars") = Scalars{}, nb::arg("buffers") = Buffers{},
        nb::arg("buffer_grads") = std::map<std::string, uintptr_t>{}, nb::arg("block_mask").none() = nb::none(),
        nb::arg("scale").none() = nb::none(), nb::arg("deterministic") = false, nb::arg("workspace") = 0,
        nb::arg("workspace_bytes") = 0, nb::arg("device") = 0, nb::arg("stream") = 0,
        "Enqueues the backward. buffer_grads: {name: float32 accumulator pointer, zeroed, buffer's shape}; "
        "workspace: cuda_backward_workspace_bytes() bytes, 16-byte aligned.");
  // The decode entry points take the same keyword arguments (cuda_decode adds workspace /
  // workspace_bytes), so a caller sizes the workspace with exactly the arguments of the call.
  m.def("cuda_decode_workspace_bytes", &cuda_decode_workspace_bytes_py, nb::arg("variant"), nb::arg("query"),
        nb::arg("key"), nb::arg("value"), nb::arg("out"), nb::kw_only(), nb::arg("lse") = 0, nb::arg("max_score") = 0,
        nb::arg("scalars") = Scalars{}, nb::arg("buffers") = Buffers{}, nb::arg("block_mask").none() = nb::none(),
        nb::arg("page_table") = 0, nb::arg("max_pages") = 0, nb::arg("kv_lens") = 0, nb::arg("q_offsets") = 0,
        nb::arg("q_offset") = 0, nb::arg("scale").none() = nb::none(), nb::arg("num_splits") = 0,
        nb::arg("device") = 0, nb::arg("stream") = 0,
        "Bytes of split workspace the cuda_decode call with these arguments needs (0 with one split); depends on "
        "shapes and the device only. The first query compiles and loads the kernels.");
  m.def("cuda_decode", &cuda_decode_py, nb::arg("variant"), nb::arg("query"), nb::arg("key"), nb::arg("value"),
        nb::arg("out"), nb::kw_only(), nb::arg("lse") = 0, nb::arg("max_score") = 0, nb::arg("scalars") = Scalars{},
        nb::arg("buffers") = Buffers{}, nb::arg("block_mask").none() = nb::none(), nb::arg("page_table") = 0,
        nb::arg("max_pages") = 0, nb::arg("kv_lens") = 0, nb::arg("q_offsets") = 0, nb::arg("q_offset") = 0,
        nb::arg("scale").none() = nb::none(), nb::arg("num_splits") = 0, nb::arg("workspace") = 0,
        nb::arg("workspace_bytes") = 0, nb::arg("device") = 0, nb::arg("stream") = 0,
        "Enqueues a decode step (include/flexattn/decode.h) on `stream`; never allocates or synchronises. Tensors "
        "as in cuda_forward; query [B,Hq,L<=64,D]; key / value contiguous [Bkv,Hkv,S,D] or, with page_table "
        "(int32 [B, max_pages] device pointer), pools [num_pages,Hkv,page_size,D]. kv_lens / q_offsets: int32 [B] "
        "device pointers or 0. block_mask in logical positions. workspace: cuda_decode_workspace_bytes() bytes.");
  m.def("cuda_backward_workspace_bytes", &workspace_bytes_py, nb::arg("q_shape"), nb::arg("k_shape"),
        nb::arg("deterministic") = false,
        nb::arg("buffer_grad_shapes") = std::map<std::string, std::vector<int64_t>>{},
        "Bytes of the cuda_backward workspace for query / key shapes q_shape and k_shape; buffer_grad_shapes: {name: shape} of the learnable buffers (in "
        "deterministic mode their gradients are summed exactly in the workspace, 264 bytes per element).");
  m.def("cuda_build_block_mask", &build_mask_gpu, nb::arg("mask_mod").none(), nb::arg("B"), nb::arg("H"),
        nb::arg("q_len"), nb::arg("kv_len"), nb::arg("q_block") = 128, nb::arg("kv_block") = 128, nb::kw_only(),
        nb::arg("scalars") = Scalars{}, nb::arg("buffers") = Buffers{}, nb::arg("device") = 0, nb::arg("stream") = 0,
        "create_block_mask on the GPU (asynchronous on `stream`). Returns the 8 int32 torch tensors of torch's "
        "layout, sharing the builder's device memory.");
  m.def("jit_stats", [] {
        const jit::JitStats s = jit::jit_stats();
        nb::dict d;
        d["compiles"] = s.compiles, d["disk_hits"] = s.disk_hits, d["memory_hits"] = s.memory_hits;
        d["corrupt_entries"] = s.corrupt_entries, d["lost_races"] = s.lost_races;
        return d;
      },
      "Counters of this process's kernel JIT: NVRTC compiles, disk-cache hits, in-process hits, damaged "
      "entries removed, compiles that lost a race to another process.");
  m.def("cuda_device_arch", [](int device) { return cuda_device_arch(device); }, nb::arg("device") = 0,
        "The NVRTC target the kernels of CUDA device `device` compile for, e.g. 'sm_90a'.");
  m.def("compile_variant", &compile_variant_py, nb::arg("variant"), nb::arg("dtype"), nb::arg("head_dim"),
        nb::arg("value_head_dim"), nb::arg("arch"), nb::arg("backward") = false, nb::arg("portable") = false,
        nb::arg("deterministic") = false, nb::arg("block_mask") = false,
        "Compiles (or finds in the cache) the kernels of a call without running them: {key, registers, "
        "spill_bytes}. On sm_90a the Hopper family the dispatch would take; portable=True: the sm80 family; "
        "deterministic=True (backward): also the deterministic mode's dQ pass; block_mask=True: for a call with a "
        "block mask (the forward's tile can depend on it).");
}

}  // namespace flexattn::py
