// The ring on the CPU: run_ring_forward/backward with steps computed by the oracle. Everything a
// rank reads arrives through the transport, so N threads reproduce the ranks' dataflow exactly.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "cp/ring.h"
#include "cp/shape_util.h"

namespace flexattn::cp {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

HostTensor to_f64(const HostTensor& t) {
  if (t.dtype == DType::F64) return t;
  HostTensor r(DType::F64, t.shape);
  for (int64_t i = 0; i < t.numel(); ++i) r.set(i, t.get(i));
  return r;
}

// A shard in a ring buffer: k [Bkv, Hkv, S_s, D] then v [Bkv, Hkv, S_s, Dv], F64. The dk/dv
// accumulators use the same layout.
struct ShardShape {
  int64_t Bkv = 0, Hkv = 0, D = 0, Dv = 0;
  int64_t k_elems(int64_t cols) const { return Bkv * Hkv * cols * D; }
  size_t bytes(int64_t cols) const { return size_t(k_elems(cols) + Bkv * Hkv * cols * Dv) * sizeof(double); }
};

HostTensor view_part(const void* buffer, const ShardShape& s, int64_t cols, bool v_part) {
  HostTensor t(DType::F64, {s.Bkv, s.Hkv, cols, v_part ? s.Dv : s.D});
  const char* p = static_cast<const char*>(buffer) + (v_part ? size_t(s.k_elems(cols)) * sizeof(double) : 0);
  std::memcpy(t.bytes.data(), p, t.bytes.size());
  return t;
}

void write_shard(void* buffer, const HostTensor& k, const HostTensor& v) {
  const HostTensor k64 = to_f64(k), v64 = to_f64(v);
  std::memcpy(buffer, k64.bytes.data(), k64.bytes.size());
  std::memcpy(static_cast<char*>(buffer) + k64.bytes.size(), v64.bytes.data(), v64.bytes.size());
}

// dst[:, :, begin + i, :] += src[:, :, i, :] on raw F64 memory of shape [BH, L, inner].
void add_rows(double* dst, int64_t L, const HostTensor& src, int64_t begin) {
  const int64_t BH = src.shape[0] * src.shape[1], rows = src.shape[2], inner = src.shape[3];
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t x = 0; x < rows * inner; ++x) dst[(bh * L + begin) * inner + x] += src.get(bh * rows * inner + x);
}

struct RankContext {
  const ShardPlan& plan;
  int rank;
  const BlockMask& bm;
  const cpu::ModFns& mods;
  cpu::Options options;
  ShardShape shape;
  std::vector<size_t> shard_bytes;

  int64_t shard_cols(int shard) const { return local_size(plan, shard, true); }
  // The oracle's inputs for one piece: the q chunk's local rows, the kv chunk's part of the shard,
  // the tiles of that (q chunk, kv chunk) pair and mods that see absolute positions.
  struct Piece {
    HostTensor q, k, v;
    BlockMask mask;
    cpu::ModFns mods;
    int64_t row0 = 0, col0 = 0;  // local offsets of the q chunk and of the kv chunk in its shard
  };
  Piece piece(const HostTensor& q_local, const void* kv, int shard, const cp::Piece& p) const {
    const Chunk& a = plan.chunks[size_t(p.q_chunk)];
    const Chunk& b = plan.chunks[size_t(p.kv_chunk)];
    Piece r;
    r.row0 = local_offset(plan, rank, p.q_chunk, false);
    r.col0 = local_offset(plan, shard, p.kv_chunk, true);
    const int64_t cols = shard_cols(shard);
    r.q = slice_seq(q_local, r.row0, r.row0 + a.q_rows.size());
    r.k = slice_seq(view_part(kv, shape, cols, false), r.col0, r.col0 + b.kv_cols.size());
    r.v = slice_seq(view_part(kv, shape, cols, true), r.col0, r.col0 + b.kv_cols.size());
    r.mask = slice_blocks(bm, a.q_blocks.begin, a.q_blocks.end, b.kv_blocks.begin, b.kv_blocks.end);
    r.mods = offset_mods(mods, a.q_rows.begin, b.kv_cols.begin);
    return r;
  }
  cpu::Options with_mask(const BlockMask& m) const {
    cpu::Options o = options;
    o.block_mask = &m;
    return o;
  }
};

RankContext context(const char* who, const ShardPlan& plan, int rank, const BlockMask& bm, const HostTensor& q,
                    const HostTensor& k, const HostTensor& v, const cpu::ModFns& mods, const cpu::Options& options) {
  const std::string w = std::string(who) + ": ";
  check(options.block_mask == nullptr, w + "options.block_mask must be null; the plan's block mask is the argument bm");
  check(plan.B == bm.B && plan.H == bm.H && plan.q_len == bm.q_len && plan.kv_len == bm.kv_len &&
            plan.q_block == bm.q_block && plan.kv_block == bm.kv_block,
        w + "bm must be the mask the plan was made from (its B, H, lengths or block sizes differ)");
  check(0 <= rank && rank < plan.world_size && plan.ranks.size() == size_t(plan.world_size),
        w + "rank must be in [0, " + std::to_string(plan.world_size) + "); got " + std::to_string(rank));
  detail::check_tensor(q, w + "q", 4, "[B, Hq, L_rank, D]");
  detail::check_tensor(k, w + "k", 4, "[Bkv, Hkv, S_rank, D]");
  detail::check_tensor(v, w + "v", 4, "[Bkv, Hkv, S_rank, Dv]");
  const int64_t rows = local_size(plan, rank, false), cols = local_size(plan, rank, true);
  check(q.shape[2] == rows, w + "q must hold rank " + std::to_string(rank) + "'s " + std::to_string(rows) +
                                " rows (its chunks' q rows, gather_rank); got " + std::to_string(q.shape[2]));
  check(k.shape[2] == cols && v.shape[2] == cols,
        w + "k and v must hold rank " + std::to_string(rank) + "'s shard of " + std::to_string(cols) +
            " positions (gather_rank); got k " + shape_string(k.shape) + ", v " + shape_string(v.shape));
  RankContext c{plan, rank, bm, mods, options, {k.shape[0], k.shape[1], k.shape[3], v.shape[3]}, {}};
  for (int s = 0; s < plan.world_size; ++s) c.shard_bytes.push_back(c.shape.bytes(c.shard_cols(s)));
  return c;
}

struct TwoBuffers {
  std::vector<char> a, b;
  explicit TwoBuffers(const std::vector<size_t>& sizes) {
    size_t m = 0;
    for (size_t s : sizes) m = std::max(m, s);
    a.assign(m, 0), b.assign(m, 0);
  }
  RingBuffers ring(const std::vector<size_t>& sizes) { return {sizes, {a.data(), b.data()}}; }
};

}  // namespace

Merged cpu_ring_forward(const ShardPlan& plan, int rank, Transport& transport, const BlockMask& bm, const HostTensor& q,
                        const HostTensor& k, const HostTensor& v, const cpu::ModFns& mods,
                        const cpu::Options& options) {
  const RankContext c = context("cpu_ring_forward", plan, rank, bm, q, k, v, mods, options);
  TwoBuffers kv(c.shard_bytes);
  write_shard(kv.a.data(), k, v);
  const int64_t rows = q.shape[2];
  Merged acc{HostTensor(DType::F64, {q.shape[0], q.shape[1], rows, v.shape[3]}),
             HostTensor(DType::F64, {q.shape[0], q.shape[1], rows})};
  for (int64_t i = 0; i < acc.lse.numel(); ++i) acc.lse.set(i, kNegInf);
  // Each step's partials are folded into the running result at once, as the GPU fold kernel does.
  run_ring_forward(plan, rank, transport, kv.ring(c.shard_bytes), [&](const RingStep& st, const void* buf) {
    for (const Piece& p : st.pieces) {
      const RankContext::Piece x = c.piece(q, buf, st.kv_shard, p);
      const cpu::ForwardResult f = cpu::forward(x.q, x.k, x.v, x.mods, c.with_mask(x.mask));
      const int64_t n = x.q.shape[2];
      const Merged m = merge_attention({slice_seq(acc.out, x.row0, x.row0 + n), f.out},
                                       {slice_seq(acc.lse, x.row0, x.row0 + n), f.lse});
      for (int64_t bh = 0; bh < q.shape[0] * q.shape[1]; ++bh) {
        const int64_t dv = v.shape[3];
        for (int64_t i = 0; i < n; ++i) {
          acc.lse.set(bh * rows + x.row0 + i, m.lse.get(bh * n + i));
          for (int64_t e = 0; e < dv; ++e)
            acc.out.set((bh * rows + x.row0 + i) * dv + e, m.out.get((bh * n + i) * dv + e));
        }
      }
    }
  });
  return acc;
}

cpu::BackwardResult cpu_ring_backward(const ShardPlan& plan, int rank, Transport& transport, const BlockMask& bm,
                                      const HostTensor& q, const HostTensor& k, const HostTensor& v,
                                      const HostTensor& out, const HostTensor& lse, const HostTensor& dout,
                                      const HostTensor* dlse, const cpu::ModFns& mods, const cpu::Options& options) {
  const RankContext c = context("cpu_ring_backward", plan, rank, bm, q, k, v, mods, options);
  const std::vector<int64_t> out_shape{q.shape[0], q.shape[1], q.shape[2], v.shape[3]};
  const std::vector<int64_t> lse_shape{q.shape[0], q.shape[1], q.shape[2]};
  for (const auto& [t, name, want] : {std::tuple{&out, "out", &out_shape}, std::tuple{&dout, "dout", &out_shape},
                                      std::tuple{&lse, "lse", &lse_shape}, std::tuple{dlse, "dlse", &lse_shape}}) {
    if (!t) continue;
    check(t->shape == *want, std::string("cpu_ring_backward: ") + name + " must have shape " +
                                 shape_string(*want) + " (the rank's rows); got " + shape_string(t->shape));
  }
  TwoBuffers kv(c.shard_bytes), dkv(c.shard_bytes);
  write_shard(kv.a.data(), k, v);
  const int64_t rows = q.shape[2], BH = q.shape[0] * q.shape[1], Dv = v.shape[3];
  cpu::BackwardResult g{HostTensor(DType::F64, q.shape), {}, {}};
  const auto step = [&](const RingStep& st, const void* buf, void* acc) {
    const int64_t cols = c.shard_cols(st.kv_shard);
    double* dk = static_cast<double*>(acc);
    double* dv = dk + c.shape.k_elems(cols);
    for (const Piece& p : st.pieces) {
      const RankContext::Piece x = c.piece(q, buf, st.kv_shard, p);
      const int64_t n = x.q.shape[2];
      // The piece's share from the global out/lse (docs/cp.md §1): dout_i = w·dout,
      // dlse_i = w·(dlse + Σ dout·(out_i − out)), w = exp(lse_i − lse).
      const cpu::ForwardResult f = cpu::forward(x.q, x.k, x.v, x.mods, c.with_mask(x.mask));
      HostTensor dout_i(DType::F64, f.out.shape), dlse_i(DType::F64, f.lse.shape);
      for (int64_t bh = 0; bh < BH; ++bh)
        for (int64_t i = 0; i < n; ++i) {
          const int64_t row = bh * rows + x.row0 + i;
          const double li = f.lse.get(bh * n + i), l = lse.get(row);
          const double w = li == kNegInf || l == kNegInf ? 0.0 : std::exp(li - l);
          double dot = 0;
          for (int64_t e = 0; e < Dv; ++e) {
            const double go = dout.get(row * Dv + e);
            dout_i.set((bh * n + i) * Dv + e, w * go);
            dot += go * (f.out.get((bh * n + i) * Dv + e) - out.get(row * Dv + e));
          }
          dlse_i.set(bh * n + i, w * ((dlse ? dlse->get(row) : 0.0) + dot));
        }
      const cpu::BackwardResult b = cpu::backward(x.q, x.k, x.v, dout_i, &dlse_i, x.mods, c.with_mask(x.mask));
      add_rows(reinterpret_cast<double*>(g.dq.bytes.data()), rows, b.dq, x.row0);
      add_rows(dk, cols, b.dk, x.col0);
      add_rows(dv, cols, b.dv, x.col0);
    }
  };
  const int own = run_ring_backward(plan, rank, transport, kv.ring(c.shard_bytes), dkv.ring(c.shard_bytes), step);
  const int64_t cols = k.shape[2];
  g.dk = view_part(own ? dkv.b.data() : dkv.a.data(), c.shape, cols, false);
  g.dv = view_part(own ? dkv.b.data() : dkv.a.data(), c.shape, cols, true);
  return g;
}

}  // namespace flexattn::cp
