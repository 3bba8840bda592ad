#pragma once
// Pieces shared by ring_forward and ring_backward (ring_cuda.cc, ring_cuda_backward.cc): argument
// checks, workspace carving, views of a piece's rows and of a shard in a ring buffer.
#include <string>
#include <unordered_set>
#include <vector>

#include "cp/ring.h"
#include "cp/shape_util.h"
#include "flexattn/cp_nccl.h"
#include "jit/driver_api.h"

namespace flexattn::cp::detail {

inline size_t align256(size_t n) { return (n + 255) / 256 * 256; }

inline bool contiguous(const TensorView& t) {
  if (t.strides.empty()) return true;
  int64_t s = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (t.strides[i] != s) return false;
    s *= t.shape[i];
  }
  return true;
}

inline std::vector<int64_t> strides_of(const TensorView& t) {
  if (!t.strides.empty()) return t.strides;
  std::vector<int64_t> s(t.shape.size(), 1);
  for (size_t i = t.shape.size() - 1; i-- > 0;) s[i] = s[i + 1] * t.shape[i + 1];
  return s;
}

// The rows [row0, row0 + rows) of dim 2 of a [B, H, L, X] view.
inline TensorView rows_view(const TensorView& t, int64_t row0, int64_t rows) {
  TensorView r = t;
  r.strides = strides_of(t);
  r.data = static_cast<char*>(t.data) + row0 * r.strides[2] * dtype_size(t.dtype);
  r.shape[2] = rows;
  return r;
}

inline TensorView dense(void* data, DType dtype, std::vector<int64_t> shape) {
  return {data, dtype, std::move(shape), {}};
}

// Sizes shared by the forward and the backward; `who` prefixes every message.
struct Geometry {
  int64_t B, Hq, L, D, Bkv, Hkv, S, Dv;
  DType dtype;
  size_t elem;
  int64_t max_rows = 0, max_cols = 0;  // largest q chunk / kv chunk: the per-piece scratch
  int64_t max_shard = 0;               // largest shard's columns
  std::vector<size_t> kv_bytes{}, acc_bytes{};
  size_t kv_part(int64_t cols, bool v) const { return size_t(Bkv * Hkv * cols * (v ? Dv : D)); }
};

inline Geometry geometry(const std::string& who, const RingForwardArgs& a) {
  check(a.plan != nullptr, who + ": plan is null; make one with plan_shards");
  const ShardPlan& plan = *a.plan;
  const int n = plan.world_size;
  check(n >= 1 && plan.ranks.size() == size_t(n), who + ": plan is malformed (world_size and rank plans differ)");
  check(0 <= a.rank && a.rank < n,
        who + ": rank must be in [0, " + std::to_string(n) + "); got " + std::to_string(a.rank));
  check(a.local.variant != nullptr, who + ": local.variant is null");
  // Each piece's kernels get the positions of its rows and columns from the plan (piece_forward).
  check(a.local.q_offset == 0 && a.local.kv_offset == 0,
        who + ": local.q_offset and local.kv_offset must be 0 (the ring sets each piece's positions from the "
              "plan); got " + std::to_string(a.local.q_offset) + " and " + std::to_string(a.local.kv_offset));
  const ForwardArgs& f = a.local;
  for (const auto& [t, name] : {std::pair{&f.q, "q"}, std::pair{&f.k, "k"}, std::pair{&f.v, "v"}})
    check(t->shape.size() == 4, who + ": local." + name + " must be 4-D; got " + shape_string(t->shape));
  check(f.q.dtype == DType::BF16 || f.q.dtype == DType::F16,
        who + ": local.q must be bf16 or f16; got " + std::string(dtype_name(f.q.dtype)));
  Geometry g{f.q.shape[0], f.q.shape[1], f.q.shape[2], f.q.shape[3], f.k.shape[0],
             f.k.shape[1], f.k.shape[2], f.v.shape[3], f.q.dtype,    size_t(dtype_size(f.q.dtype))};
  const int64_t rows = local_size(plan, a.rank, false), cols = local_size(plan, a.rank, true);
  check(g.L == rows, who + ": local.q must hold rank " + std::to_string(a.rank) + "'s " + std::to_string(rows) +
                         " rows (its chunks' q rows, ascending chunk order); got " + shape_string(f.q.shape));
  check(g.S == cols && f.v.shape[2] == cols, who + ": local.k and local.v must hold rank " + std::to_string(a.rank) +
                                                 "'s shard of " + std::to_string(cols) + " positions; got k " +
                                                 shape_string(f.k.shape) + ", v " + shape_string(f.v.shape));
  check(contiguous(f.k) && contiguous(f.v), who + ": local.k and local.v must be contiguous (they are sent as bytes)");
  for (const Chunk& c : plan.chunks) {
    g.max_rows = std::max(g.max_rows, c.q_rows.size());
    g.max_cols = std::max(g.max_cols, c.kv_cols.size());
  }
  for (int s = 0; s < n; ++s) {
    const int64_t c = local_size(plan, s, true);
    g.max_shard = std::max(g.max_shard, c);
    g.kv_bytes.push_back((g.kv_part(c, false) + g.kv_part(c, true)) * g.elem);
    g.acc_bytes.push_back((g.kv_part(c, false) + g.kv_part(c, true)) * sizeof(float));
  }
  return g;
}

// Byte offsets into the workspace, each 256-byte aligned.
struct Carve {
  size_t end = 0;
  size_t take(size_t bytes) {
    const size_t at = end;
    end += align256(bytes);
    return at;
  }
};

struct ForwardLayout {
  size_t kv[2], acc_out, acc_lse, part_out, part_lse, bytes;
};
inline ForwardLayout forward_layout(const Geometry& g) {
  Carve c;
  ForwardLayout l{};
  const size_t shard = (g.kv_part(g.max_shard, false) + g.kv_part(g.max_shard, true)) * g.elem;
  l.kv[0] = c.take(shard), l.kv[1] = c.take(shard);
  l.acc_out = c.take(size_t(g.B * g.Hq * g.L * g.Dv) * 4);
  l.acc_lse = c.take(size_t(g.B * g.Hq * g.L) * 4);
  l.part_out = c.take(size_t(g.B * g.Hq * g.max_rows * g.Dv) * g.elem);
  l.part_lse = c.take(size_t(g.B * g.Hq * g.max_rows) * 4);
  l.bytes = c.end;
  return l;
}

inline void check_workspace(const std::string& who, void* ws, size_t have, size_t need, const char* sizer) {
  check(ws != nullptr && have >= need, who + ": workspace needs " + std::to_string(need) + " bytes (" + sizer +
                                           "), got " + std::to_string(ws ? have : 0));
  check(reinterpret_cast<uintptr_t>(ws) % 256 == 0, who + ": workspace must be 256-byte aligned");
}

inline void check_comm(const std::string& who, const RingForwardArgs& a) {
  check(a.comm != nullptr, who + ": comm is null; create one with nccl_init");
  check(a.comm->world_size() == a.plan->world_size && a.comm->rank() == a.rank,
        who + ": comm is rank " + std::to_string(a.comm->rank()) + " of " + std::to_string(a.comm->world_size()) +
            " but the call is for rank " + std::to_string(a.rank) + " of the plan's " +
            std::to_string(a.plan->world_size));
  check(a.comm->device() == a.local.device, who + ": comm is bound to device " + std::to_string(a.comm->device()) +
                                                " but local.device is " + std::to_string(a.local.device));
}

inline char* at(void* ws, size_t off) { return static_cast<char*>(ws) + off; }

// Copies the rank's own k and v into a shard buffer (k part, then v part).
inline void load_own_shard(const Geometry& g, const ForwardArgs& f, void* buffer, jit::CUstream st) {
  const size_t kb = g.kv_part(g.S, false) * g.elem, vb = g.kv_part(g.S, true) * g.elem;
  const auto dptr = [](const void* p) { return jit::CUdeviceptr(reinterpret_cast<uintptr_t>(p)); };
  jit::cu_check(jit::driver().cuMemcpyDtoDAsync(dptr(buffer), dptr(f.k.data), kb, st),
                "ring: copy k to the ring buffer");
  jit::cu_check(jit::driver().cuMemcpyDtoDAsync(dptr(at(buffer, kb)), dptr(f.v.data), vb, st),
                "ring: copy v to the ring buffer");
}

// The k or v columns [col0, col0 + cols) of a shard of `shard_cols` columns in a ring buffer.
inline TensorView shard_view(const Geometry& g, const void* buffer, int64_t shard_cols, int64_t col0, int64_t cols,
                             bool v) {
  const int64_t x = v ? g.Dv : g.D;
  const char* base = static_cast<const char*>(buffer) + (v ? g.kv_part(shard_cols, false) * g.elem : 0);
  return {const_cast<char*>(base) + col0 * x * g.elem,
          g.dtype,
          {g.Bkv, g.Hkv, cols, x},
          {g.Hkv * shard_cols * x, shard_cols * x, x, 1}};
}

// What one piece needs to know about where its rows and columns are.
struct PieceAt {
  int64_t row0, rows, col0, cols, shard_cols;
  const DeviceBlockMask* mask;
  int64_t q_pos, kv_pos;  // global positions of the piece's first row and column (what the mods see)
};
inline PieceAt piece_at(const RingForwardArgs& a, const RingStep& st, const Piece& p) {
  const ShardPlan& plan = *a.plan;
  const int n_chunks = int(plan.chunks.size());
  return {local_offset(plan, a.rank, p.q_chunk, false),
          plan.chunks[size_t(p.q_chunk)].q_rows.size(),
          local_offset(plan, st.kv_shard, p.kv_chunk, true),
          plan.chunks[size_t(p.kv_chunk)].kv_cols.size(),
          local_size(plan, st.kv_shard, true),
          a.piece_masks ? &a.piece_masks[size_t(p.q_chunk * n_chunks + p.kv_chunk)] : nullptr,
          plan.chunks[size_t(p.q_chunk)].q_rows.begin,
          plan.chunks[size_t(p.kv_chunk)].kv_cols.begin};
}

inline ForwardArgs piece_forward(const Geometry& g, const RingForwardArgs& a, const PieceAt& x, const void* kv) {
  ForwardArgs f = a.local;
  f.q = rows_view(a.local.q, x.row0, x.rows);
  f.k = shard_view(g, kv, x.shard_cols, x.col0, x.cols, false);
  f.v = shard_view(g, kv, x.shard_cols, x.col0, x.cols, true);
  f.block_mask = x.mask;
  f.max_score = nullptr;
  f.q_offset = x.q_pos;
  f.kv_offset = x.kv_pos;
  return f;
}

}  // namespace flexattn::cp::detail
