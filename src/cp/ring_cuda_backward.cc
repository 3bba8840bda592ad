// ring_backward: the kv ring again, with fp32 dk/dv accumulators travelling with each shard. Every
// piece's cuda_backward gets the rank's global out and lse rows, which makes its dq, dk, dv that
// piece's exact share of the unsplit gradient (docs/cp.md §1): no merge backward.
#include "cp/nccl_transport.h"
#include "cp/ring_cuda_util.h"
#include "cp/ring_kernels.h"

namespace flexattn::cp {
using namespace detail;
namespace {

struct BackwardLayout {
  size_t kv[2], acc[2], dq_acc, dq_s, dk_s, dv_s, lse_s, dlse_s, bwd, bwd_bytes, bytes;
};

// cuda_backward's workspace for the largest piece: its rows, and its columns (the Hopper backward's launch order
// takes two ints per CTA, one CTA per kv tile).
size_t piece_workspace(const Geometry& g) {
  BackwardArgs b;
  b.fwd.q = dense(nullptr, g.dtype, {g.B, g.Hq, g.max_rows, g.D});
  b.fwd.k = dense(nullptr, g.dtype, {g.Bkv, g.Hkv, g.max_cols, g.D});
  return backward_workspace_bytes(b);
}

BackwardLayout backward_layout(const Geometry& g) {
  Carve c;
  BackwardLayout l{};
  const int64_t cols = g.max_shard;
  l.kv[0] = c.take((g.kv_part(cols, false) + g.kv_part(cols, true)) * g.elem);
  l.kv[1] = c.take((g.kv_part(cols, false) + g.kv_part(cols, true)) * g.elem);
  l.acc[0] = c.take((g.kv_part(cols, false) + g.kv_part(cols, true)) * 4);
  l.acc[1] = c.take((g.kv_part(cols, false) + g.kv_part(cols, true)) * 4);
  l.dq_acc = c.take(size_t(g.B * g.Hq * g.L * g.D) * 4);
  l.dq_s = c.take(size_t(g.B * g.Hq * g.max_rows * g.D) * g.elem);
  l.dk_s = c.take(g.kv_part(g.max_cols, false) * g.elem);
  l.dv_s = c.take(g.kv_part(g.max_cols, true) * g.elem);
  l.lse_s = c.take(size_t(g.B * g.Hq * g.max_rows) * 4);
  l.dlse_s = c.take(size_t(g.B * g.Hq * g.max_rows) * 4);
  l.bwd_bytes = piece_workspace(g);
  l.bwd = c.take(l.bwd_bytes);
  l.bytes = c.end;
  return l;
}

void check_rank_view(const std::string& who, const TensorView& t, const char* name, std::vector<int64_t> want,
                     DType dtype) {
  check(t.shape == want && t.dtype == dtype, who + ": " + name + " must be " + shape_string(want) + " of " +
                                                 std::string(dtype_name(dtype)) + "; got " + shape_string(t.shape) +
                                                 " of " + std::string(dtype_name(t.dtype)));
}

}  // namespace

size_t ring_backward_workspace_bytes(const RingBackwardArgs& a) {
  return backward_layout(geometry("ring_backward_workspace_bytes", a.fwd)).bytes;
}

void ring_backward(const RingBackwardArgs& a) {
  const std::string who = "ring_backward";
  const Geometry g = geometry(who, a.fwd);
  const BackwardLayout l = backward_layout(g);
  const ForwardArgs& f = a.fwd.local;
  check_rank_view(who, f.out, "fwd.local.out", {g.B, g.Hq, g.L, g.Dv}, g.dtype);
  check(f.lse != nullptr, who + ": fwd.local.lse is null; the backward needs ring_forward's lse");
  check_rank_view(who, a.dout, "dout", {g.B, g.Hq, g.L, g.Dv}, g.dtype);
  check_rank_view(who, a.dq, "dq", {g.B, g.Hq, g.L, g.D}, g.dtype);
  check_rank_view(who, a.dk, "dk", {g.Bkv, g.Hkv, g.S, g.D}, g.dtype);
  check_rank_view(who, a.dv, "dv", {g.Bkv, g.Hkv, g.S, g.Dv}, g.dtype);
  check_workspace(who, a.workspace, a.workspace_bytes, l.bytes, "ring_backward_workspace_bytes");
  check_comm(who, a.fwd);
  jit::use_device(f.device);
  const auto st = static_cast<jit::CUstream>(f.stream);
  void* ws = a.workspace;
  const int64_t BH = g.B * g.Hq, BHkv = g.Bkv * g.Hkv;
  auto* dq_acc = reinterpret_cast<float*>(at(ws, l.dq_acc));
  auto* lse_s = reinterpret_cast<float*>(at(ws, l.lse_s));
  auto* dlse_s = reinterpret_cast<float*>(at(ws, l.dlse_s));
  kernels::slice_or_fill(dq_acc, nullptr, 1, BH * g.L * g.D, 0, 0, 0.f, st);
  kernels::slice_or_fill(reinterpret_cast<float*>(at(ws, l.acc[0])), nullptr, 1,
                         int64_t(g.acc_bytes[size_t(a.fwd.rank)] / 4), 0, 0, 0.f, st);
  load_own_shard(g, f, at(ws, l.kv[0]), st);

  const auto step_fn = [&](const RingStep& step, const void* kv, void* acc) {
    for (const Piece& p : step.pieces) {
      const PieceAt x = piece_at(a.fwd, step, p);
      // lse and dlse are plain [B, H, L] arrays: a piece's rows must be gathered to be [B, H, rows].
      kernels::slice_or_fill(lse_s, f.lse, BH, x.rows, x.row0, g.L, 0.f, st);
      if (a.dlse) kernels::slice_or_fill(dlse_s, a.dlse, BH, x.rows, x.row0, g.L, 0.f, st);
      BackwardArgs b;
      b.fwd = piece_forward(g, a.fwd, x, kv);
      b.fwd.out = rows_view(f.out, x.row0, x.rows);
      b.fwd.lse = lse_s;
      b.dout = rows_view(a.dout, x.row0, x.rows);
      b.dlse = a.dlse ? dlse_s : nullptr;
      b.dq = dense(at(ws, l.dq_s), g.dtype, {g.B, g.Hq, x.rows, g.D});
      b.dk = dense(at(ws, l.dk_s), g.dtype, {g.Bkv, g.Hkv, x.cols, g.D});
      b.dv = dense(at(ws, l.dv_s), g.dtype, {g.Bkv, g.Hkv, x.cols, g.Dv});
      b.workspace = at(ws, l.bwd);
      b.workspace_bytes = l.bwd_bytes;
      cuda_backward(b);
      auto* dk_acc = static_cast<float*>(acc);
      float* dv_acc = dk_acc + g.kv_part(x.shard_cols, false);
      kernels::add_rows(dq_acc, b.dq.data, BH, x.rows, x.row0, g.L, g.D, g.dtype, st);
      kernels::add_rows(dk_acc, b.dk.data, BHkv, x.cols, x.col0, x.shard_cols, g.D, g.dtype, st);
      kernels::add_rows(dv_acc, b.dv.data, BHkv, x.cols, x.col0, x.shard_cols, g.Dv, g.dtype, st);
    }
  };
  NcclTransport transport(*a.fwd.comm, st);
  const int own =
      run_ring_backward(*a.fwd.plan, a.fwd.rank, transport, {g.kv_bytes, {at(ws, l.kv[0]), at(ws, l.kv[1])}},
                        {g.acc_bytes, {at(ws, l.acc[0]), at(ws, l.acc[1])}}, step_fn);
  const auto* dk_own = reinterpret_cast<const float*>(at(ws, l.acc[own]));
  const auto store = [&](const TensorView& dst, const float* src, int64_t B, int64_t H, int64_t rows, int64_t x) {
    const std::vector<int64_t> s = strides_of(dst);
    const int64_t s3[3] = {s[0], s[1], s[2]};
    kernels::store(dst.data, s3, src, B, H, rows, x, g.dtype, st);
  };
  store(a.dq, dq_acc, g.B, g.Hq, g.L, g.D);
  store(a.dk, dk_own, g.Bkv, g.Hkv, g.S, g.D);
  store(a.dv, dk_own + g.kv_part(g.S, false), g.Bkv, g.Hkv, g.S, g.Dv);
}

}  // namespace flexattn::cp
