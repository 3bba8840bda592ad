// Host tensors -> device -> kernels -> host tensors. Not a hot path: it exists so that the CLI, the
// GPU tests and the benchmarks share one honest way of running the cuda backend.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "flexattn/attention.h"
#include "flexattn/cuda_host.h"
#include "flexattn/error.h"
#include "jit/device.h"
#include "jit/sys.h"
#include "runtime/tma_sm90.h"

namespace flexattn {

namespace {

using jit::DeviceBuffer;

HostTensor converted(const HostTensor& t, DType to) {
  HostTensor r(to, t.shape);
  for (int64_t i = 0; i < t.numel(); ++i) r.set(i, t.get(i));
  return r;
}

struct Uploads {
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  void* upload(const void* host, size_t bytes) {
    buffers.push_back(std::make_unique<DeviceBuffer>(std::max<size_t>(bytes, 16)));
    if (bytes) buffers.back()->upload(host, bytes);
    return reinterpret_cast<void*>(buffers.back()->ptr());
  }
  void* poisoned(size_t bytes) {
    std::vector<uint8_t> nan(std::max<size_t>(bytes, 16), 0xff);  // 0xffff.. is NaN in bf16, f16, f32
    return upload(nan.data(), nan.size());
  }
  const int32_t* ints(const std::vector<int32_t>& v) {
    if (v.empty()) return nullptr;
    return static_cast<const int32_t*>(upload(v.data(), v.size() * 4));
  }
};

TensorView view_of(void* data, DType t, const std::vector<int64_t>& shape) {
  TensorView v;
  v.data = data;
  v.dtype = t;
  v.shape = shape;
  return v;
}

HostTensor download(const void* dev, DType t, const std::vector<int64_t>& shape) {
  HostTensor raw(t, shape);
  jit::cu_check(jit::driver().cuMemcpyDtoH(raw.data(), reinterpret_cast<jit::CUdeviceptr>(dev), raw.bytes.size()),
                "copy to host");
  return t == DType::F32 ? raw : converted(raw, DType::F32);
}


}  // namespace

CudaHostResult cuda_run_host(const CudaHostRequest& r) {
  check(r.variant && r.q && r.k && r.v, "cuda_run_host: variant, q, k and v are required");
  jit::use_device(r.device);
  Uploads up;
  const HostTensor q = converted(*r.q, r.dtype), k = converted(*r.k, r.dtype), v = converted(*r.v, r.dtype);
  ForwardArgs fa;
  fa.variant = r.variant;
  fa.q = view_of(up.upload(q.data(), q.bytes.size()), r.dtype, q.shape);
  fa.k = view_of(up.upload(k.data(), k.bytes.size()), r.dtype, k.shape);
  fa.v = view_of(up.upload(v.data(), v.bytes.size()), r.dtype, v.shape);
  check(q.shape.size() == 4 && v.shape.size() == 4, "q, v: expected 4-D tensors");
  const std::vector<int64_t> out_shape{q.shape[0], q.shape[1], q.shape[2], v.shape[3]};
  const std::vector<int64_t> row_shape{q.shape[0], q.shape[1], q.shape[2]};
  const int64_t rows = q.shape[0] * q.shape[1] * q.shape[2];
  fa.out = view_of(up.poisoned(size_t(rows * v.shape[3]) * 2), r.dtype, out_shape);
  fa.lse = static_cast<float*>(up.poisoned(size_t(rows) * 4));
  fa.max_score = static_cast<float*>(up.poisoned(size_t(rows) * 4));
  fa.scale = r.scale;
  fa.q_offset = r.q_offset, fa.kv_offset = r.kv_offset;
  fa.device = r.device;
  if (r.bindings) {
    fa.bindings.scalars = r.bindings->scalars;
    for (const auto& [name, view] : r.bindings->buffers) {
      int64_t n = 1;
      for (int64_t s : view.shape) n *= s;
      ir::BufferView dv = view;
      dv.data = up.upload(view.data, size_t(n) * dtype_size(view.dtype));
      fa.bindings.buffers[name] = dv;
    }
  }
  DeviceBlockMask dbm;
  if (r.block_mask) {
    const BlockMask& m = *r.block_mask;
    dbm.kv_num_blocks = up.ints(m.kv_num_blocks);
    dbm.kv_indices = up.ints(m.kv_indices);
    dbm.full_kv_num_blocks = m.has_full ? up.ints(m.full_kv_num_blocks) : nullptr;
    dbm.full_kv_indices = m.has_full ? up.ints(m.full_kv_indices) : nullptr;
    dbm.q_num_blocks = up.ints(m.q_num_blocks);
    dbm.q_indices = up.ints(m.q_indices);
    dbm.full_q_num_blocks = m.has_full ? up.ints(m.full_q_num_blocks) : nullptr;
    dbm.full_q_indices = m.has_full ? up.ints(m.full_q_indices) : nullptr;
    dbm.B = m.B, dbm.H = m.H, dbm.nq = m.nq, dbm.nkv = m.nkv, dbm.q_len = m.q_len, dbm.kv_len = m.kv_len;
    dbm.q_block = m.q_block, dbm.kv_block = m.kv_block;
    // The longest-first work order of the sm90 forward: under auto only where the natural one is not (decided here,
    // so the kernel gets no q_order_on flag).
    const runtime::Sm90RowOrder order = runtime::sm90_row_order_mode();
    if (order == runtime::Sm90RowOrder::always ||
        (order == runtime::Sm90RowOrder::automatic &&
         runtime::row_order_worth_it(m.kv_num_blocks.data(), m.has_full ? m.full_kv_num_blocks.data() : nullptr, m.B * m.H,
                            m.nq)))
      dbm.q_order = up.ints(block_mask_row_order(m));
    fa.block_mask = &dbm;
  }

  CudaHostResult res;
  cuda_forward(fa);
  jit::cu_check(jit::driver().cuCtxSynchronize(), "forward kernel");
  res.out = download(fa.out.data, r.dtype, out_shape);
  res.lse = download(fa.lse, DType::F32, row_shape);
  res.max_score = download(fa.max_score, DType::F32, row_shape);
  if (r.timing_reps > 0) res.fwd_ms = jit::median_event_ms(r.timing_reps, 2, [&] { cuda_forward(fa); });
  if (!r.dout) return res;

  BackwardArgs ba;
  ba.fwd = fa;
  const HostTensor dout = converted(*r.dout, r.dtype);
  ba.dout = view_of(up.upload(dout.data(), dout.bytes.size()), r.dtype, dout.shape);
  if (r.dlse) {
    const HostTensor dlse = converted(*r.dlse, DType::F32);
    ba.dlse = static_cast<const float*>(up.upload(dlse.data(), dlse.bytes.size()));
  }
  ba.dq = view_of(up.poisoned(q.bytes.size()), r.dtype, q.shape);
  ba.dk = view_of(up.poisoned(k.bytes.size()), r.dtype, k.shape);
  ba.dv = view_of(up.poisoned(v.bytes.size()), r.dtype, v.shape);
  ba.deterministic = r.deterministic;
  std::map<std::string, std::pair<void*, std::vector<int64_t>>> grads;
  for (const std::string& g : r.variant->grad_buffers) {
    auto it = fa.bindings.buffers.find(g);
    if (it == fa.bindings.buffers.end()) continue;
    int64_t n = 1;
    for (int64_t s : it->second.shape) n *= s;
    std::vector<float> zeros(size_t(n), 0.f);
    void* dev = up.upload(zeros.data(), zeros.size() * 4);
    ba.fwd.bindings.buffer_grads[g] = static_cast<float*>(dev);
    grads[g] = {dev, it->second.shape};
  }
  ba.workspace_bytes = backward_workspace_bytes(ba);
  // Poisoned like the outputs: the backward must set up every word of its workspace it reads (torch callers pass
  // torch.empty).
  ba.workspace = up.poisoned(ba.workspace_bytes);
  cuda_backward(ba);
  jit::cu_check(jit::driver().cuCtxSynchronize(), "backward kernels");
  res.dq = download(ba.dq.data, r.dtype, q.shape);
  res.dk = download(ba.dk.data, r.dtype, k.shape);
  res.dv = download(ba.dv.data, r.dtype, v.shape);
  for (auto& [name, g] : grads) res.buffer_grads[name] = download(g.first, DType::F32, g.second);
  if (r.timing_reps > 0) res.bwd_ms = jit::median_event_ms(r.timing_reps, 2, [&] { cuda_backward(ba); });
  return res;
}

}  // namespace flexattn
