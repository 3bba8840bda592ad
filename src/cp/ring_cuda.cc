// ring_forward / ring_backward: the ring executor over NCCL with cuda_forward / cuda_backward per piece
// and the fold kernels of ring_kernels.cc. Compile-verified; the argument checks run (and are tested)
// without a GPU because they come before the first device call.
#include <limits>

#include "cp/nccl_transport.h"
#include "cp/ring_cuda_util.h"
#include "cp/ring_kernels.h"

namespace flexattn::cp {
using namespace detail;

size_t ring_forward_workspace_bytes(const RingForwardArgs& a) {
  return forward_layout(geometry("ring_forward_workspace_bytes", a)).bytes;
}

void ring_forward(const RingForwardArgs& a) {
  const std::string who = "ring_forward";
  const Geometry g = geometry(who, a);
  const ForwardLayout l = forward_layout(g);
  check(a.local.out.shape == std::vector<int64_t>{g.B, g.Hq, g.L, g.Dv} && a.local.out.dtype == g.dtype,
        who + ": local.out must be [B, Hq, L_rank, Dv] = " + shape_string({g.B, g.Hq, g.L, g.Dv}) + " of " +
            std::string(dtype_name(g.dtype)) + "; got " + shape_string(a.local.out.shape) + " of " +
            std::string(dtype_name(a.local.out.dtype)));
  check_workspace(who, a.workspace, a.workspace_bytes, l.bytes, "ring_forward_workspace_bytes");
  check_comm(who, a);
  jit::use_device(a.local.device);
  const auto st = static_cast<jit::CUstream>(a.local.stream);
  void* ws = a.workspace;
  auto* acc_out = reinterpret_cast<float*>(at(ws, l.acc_out));
  auto* acc_lse = reinterpret_cast<float*>(at(ws, l.acc_lse));
  auto* part_lse = reinterpret_cast<float*>(at(ws, l.part_lse));
  const int64_t BH = g.B * g.Hq;
  kernels::slice_or_fill(acc_out, nullptr, 1, BH * g.L * g.Dv, 0, 0, 0.f, st);
  kernels::slice_or_fill(acc_lse, nullptr, 1, BH * g.L, 0, 0, -std::numeric_limits<float>::infinity(), st);
  load_own_shard(g, a.local, at(ws, l.kv[0]), st);
  NcclTransport transport(*a.comm, st);
  run_ring_forward(*a.plan, a.rank, transport, {g.kv_bytes, {at(ws, l.kv[0]), at(ws, l.kv[1])}},
                   [&](const RingStep& step, const void* kv) {
                     for (const Piece& p : step.pieces) {
                       const PieceAt x = piece_at(a, step, p);
                       ForwardArgs f = piece_forward(g, a, x, kv);
                       f.out = dense(at(ws, l.part_out), g.dtype, {g.B, g.Hq, x.rows, g.Dv});
                       f.lse = part_lse;
                       cuda_forward(f);
                       kernels::fold(f.out.data, part_lse, acc_out, acc_lse, BH, x.rows, x.row0, g.L, g.Dv, g.dtype,
                                     st);
                     }
                   });
  const std::vector<int64_t> os = strides_of(a.local.out);
  const int64_t out_strides[3] = {os[0], os[1], os[2]};
  kernels::store(a.local.out.data, out_strides, acc_out, g.B, g.Hq, g.L, g.Dv, g.dtype, st);
  if (a.local.lse)
    jit::cu_check(jit::driver().cuMemcpyDtoDAsync(jit::CUdeviceptr(reinterpret_cast<uintptr_t>(a.local.lse)),
                                                  jit::CUdeviceptr(reinterpret_cast<uintptr_t>(acc_lse)),
                                                  size_t(BH * g.L) * 4, st),
                  "ring_forward: copy lse");
}

}  // namespace flexattn::cp
