// Executing a ShardPlan with the CPU oracle: the ring's dataflow, rank by rank, step by step.
#include <limits>
#include <string>

#include "cp/shape_util.h"
#include "flexattn/cp.h"

namespace flexattn::cp {
namespace {

void check_plan(const char* who, const ShardPlan& plan, const BlockMask& bm, const HostTensor& q, const HostTensor& k,
                const HostTensor& v, const cpu::Options& options) {
  const std::string w = std::string(who) + ": ";
  check(options.block_mask == nullptr,
        w + "options.block_mask must be null; the plan's block mask is the argument bm");
  const auto same = [&](const char* what, int64_t in_plan, int64_t in_bm) {
    check(in_plan == in_bm, w + "bm must be the mask the plan was made from; its " + what + " is " +
                                std::to_string(in_bm) + " but the plan's is " + std::to_string(in_plan));
  };
  same("B", plan.B, bm.B);
  same("H", plan.H, bm.H);
  same("q_len", plan.q_len, bm.q_len);
  same("kv_len", plan.kv_len, bm.kv_len);
  same("q_block", plan.q_block, bm.q_block);
  same("kv_block", plan.kv_block, bm.kv_block);
  const int n = plan.world_size;
  const size_t want_chunks = size_t(plan.layout == Layout::zigzag ? 2 * n : n);
  check(n >= 1 && plan.ranks.size() == size_t(n) && plan.chunks.size() == want_chunks,
        w + "plan is malformed: expected world_size >= 1 ranks and N (contiguous) or 2N (zigzag) chunks; got " +
            std::to_string(plan.ranks.size()) + " ranks, " + std::to_string(plan.chunks.size()) + " chunks");
  detail::check_tensor(q, w + "q", 4, "[B, Hq, L, D]");
  detail::check_tensor(k, w + "k", 4, "[Bkv, Hkv, S, D]");
  detail::check_tensor(v, w + "v", 4, "[Bkv, Hkv, S, Dv]");
  check(q.shape[2] == plan.q_len, w + "q has L = " + std::to_string(q.shape[2]) +
                                      " rows but the plan was made for q_len = " + std::to_string(plan.q_len));
  check(k.shape[2] == plan.kv_len && v.shape[2] == plan.kv_len,
        w + "k and v must have S = kv_len = " + std::to_string(plan.kv_len) + " positions; got k " +
            shape_string(k.shape) + ", v " + shape_string(v.shape));
}

// The kv chunks each q chunk is combined with, in the order its rank computes them. A piece listed
// twice would be counted twice, so it is rejected like a chunk id out of range.
std::vector<std::vector<int>> pieces_by_q_chunk(const char* who, const ShardPlan& plan) {
  const size_t n = plan.chunks.size();
  std::vector<std::vector<int>> by(n);
  std::vector<uint8_t> seen(n * n, 0);
  for (const RankPlan& rp : plan.ranks)
    for (const RingStep& st : rp.steps)
      for (const Piece& p : st.pieces) {
        std::string name = "(";  // built with += : GCC 12 warns (-Wrestrict) on "(" + std::string
        name += std::to_string(p.q_chunk) + ", " + std::to_string(p.kv_chunk) + ")";
        check(p.q_chunk >= 0 && size_t(p.q_chunk) < n && p.kv_chunk >= 0 && size_t(p.kv_chunk) < n,
              std::string(who) + ": plan is malformed: a piece names chunks " + name + " outside [0, " +
                  std::to_string(n) + ")");
        uint8_t& s = seen[size_t(p.q_chunk) * n + size_t(p.kv_chunk)];
        check(!s, std::string(who) + ": plan is malformed: piece " + name + " is listed twice");
        s = 1;
        by[size_t(p.q_chunk)].push_back(p.kv_chunk);
      }
  return by;
}

// The sub-problem of one piece: the tiles of (q chunk, kv chunk) and mods that see absolute positions.
struct SubProblem {
  BlockMask mask;
  cpu::ModFns mods;
};
SubProblem sub_problem(const ShardPlan& plan, const BlockMask& bm, const cpu::ModFns& mods, int qc, int kc) {
  const Chunk& a = plan.chunks[size_t(qc)];
  const Chunk& b = plan.chunks[size_t(kc)];
  return {slice_blocks(bm, a.q_blocks.begin, a.q_blocks.end, b.kv_blocks.begin, b.kv_blocks.end),
          offset_mods(mods, a.q_rows.begin, b.kv_cols.begin)};
}

cpu::Options with_mask(cpu::Options o, const BlockMask& mask) {
  o.block_mask = &mask;
  return o;
}

void add_rows(HostTensor* dst, const HostTensor& src, int64_t begin) {
  const int64_t BH = src.shape[0] * src.shape[1], rows = src.shape[2], inner = src.shape[3];
  const int64_t L = dst->shape[2];
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t x = 0; x < rows * inner; ++x) {
      const int64_t d = (bh * L + begin) * inner + x;
      dst->set(d, dst->get(d) + src.get(bh * rows * inner + x));
    }
}

void put_rows(HostTensor* dst, const HostTensor& src, int64_t begin) {
  const int64_t BH = src.shape[0] * src.shape[1], rows = src.shape[2];
  const int64_t inner = src.shape.size() == 4 ? src.shape[3] : 1, L = dst->shape[2];
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t x = 0; x < rows * inner; ++x) dst->set((bh * L + begin) * inner + x, src.get(bh * rows * inner + x));
}

std::vector<HostTensor> seq_chunks(const ShardPlan& plan, const HostTensor& t) {
  std::vector<HostTensor> out;
  for (const Chunk& c : plan.chunks) out.push_back(slice_seq(t, c.kv_cols.begin, c.kv_cols.end));
  return out;
}

}  // namespace

Merged cpu_plan_forward(const ShardPlan& plan, const BlockMask& bm, const HostTensor& q, const HostTensor& k,
                        const HostTensor& v, const cpu::ModFns& mods, const cpu::Options& options) {
  check_plan("cpu_plan_forward", plan, bm, q, k, v, options);
  const std::vector<HostTensor> ks = seq_chunks(plan, k), vs = seq_chunks(plan, v);
  Merged r{HostTensor(DType::F64, {q.shape[0], q.shape[1], q.shape[2], v.shape[3]}),
           HostTensor(DType::F64, {q.shape[0], q.shape[1], q.shape[2]})};
  for (int64_t i = 0; i < r.lse.numel(); ++i) r.lse.set(i, -std::numeric_limits<double>::infinity());
  const auto by = pieces_by_q_chunk("cpu_plan_forward", plan);
  for (size_t qc = 0; qc < by.size(); ++qc) {
    if (by[qc].empty()) continue;  // no piece: out 0, lse -inf
    const Range rows = plan.chunks[qc].q_rows;
    const HostTensor q_c = slice_seq(q, rows.begin, rows.end);
    std::vector<HostTensor> outs, lses;
    for (int kc : by[qc]) {
      const SubProblem p = sub_problem(plan, bm, mods, int(qc), kc);
      cpu::ForwardResult f = cpu::forward(q_c, ks[size_t(kc)], vs[size_t(kc)], p.mods, with_mask(options, p.mask));
      outs.push_back(std::move(f.out));
      lses.push_back(std::move(f.lse));
    }
    const Merged m = merge_attention(outs, lses);
    put_rows(&r.out, m.out, rows.begin);
    put_rows(&r.lse, m.lse, rows.begin);
  }
  return r;
}

cpu::BackwardResult cpu_plan_backward(const ShardPlan& plan, const BlockMask& bm, const HostTensor& q,
                                      const HostTensor& k, const HostTensor& v, const HostTensor& dout,
                                      const HostTensor* dlse, const cpu::ModFns& mods, const cpu::Options& options) {
  check_plan("cpu_plan_backward", plan, bm, q, k, v, options);
  const std::vector<int64_t> out_shape{q.shape[0], q.shape[1], q.shape[2], v.shape[3]};
  detail::check_tensor(dout, "cpu_plan_backward: dout", 4, "[B, Hq, L, Dv]");
  check(dout.shape == out_shape, "cpu_plan_backward: dout must have shape [B, Hq, L, Dv] = " +
                                     shape_string(out_shape) + "; got " + shape_string(dout.shape));
  if (dlse) {
    detail::check_tensor(*dlse, "cpu_plan_backward: dlse", 3, "[B, Hq, L]");
    check(dlse->shape == std::vector<int64_t>(out_shape.begin(), out_shape.end() - 1),
          "cpu_plan_backward: dlse must have shape [B, Hq, L]; got " + shape_string(dlse->shape));
  }
  const std::vector<HostTensor> ks = seq_chunks(plan, k), vs = seq_chunks(plan, v);
  cpu::BackwardResult g{HostTensor(DType::F64, q.shape), HostTensor(DType::F64, k.shape),
                        HostTensor(DType::F64, v.shape)};
  const auto by = pieces_by_q_chunk("cpu_plan_backward", plan);
  for (size_t qc = 0; qc < by.size(); ++qc) {
    if (by[qc].empty()) continue;  // rows that attend nothing get no gradient
    const Range rows = plan.chunks[qc].q_rows;
    const HostTensor q_c = slice_seq(q, rows.begin, rows.end);
    const HostTensor dout_c = slice_seq(dout, rows.begin, rows.end);
    const HostTensor dlse_c = dlse ? slice_seq(*dlse, rows.begin, rows.end) : HostTensor();
    std::vector<SubProblem> pieces;
    std::vector<HostTensor> outs, lses;
    for (int kc : by[qc]) {
      pieces.push_back(sub_problem(plan, bm, mods, int(qc), kc));
      const SubProblem& p = pieces.back();
      cpu::ForwardResult f = cpu::forward(q_c, ks[size_t(kc)], vs[size_t(kc)], p.mods, with_mask(options, p.mask));
      outs.push_back(std::move(f.out));
      lses.push_back(std::move(f.lse));
    }
    const MergeGrads mg = merge_attention_backward(outs, lses, dout_c, dlse ? &dlse_c : nullptr);
    for (size_t i = 0; i < pieces.size(); ++i) {
      const int kc = by[qc][i];
      const cpu::BackwardResult b = cpu::backward(q_c, ks[size_t(kc)], vs[size_t(kc)], mg.douts[i], &mg.dlses[i],
                                                  pieces[i].mods, with_mask(options, pieces[i].mask));
      add_rows(&g.dq, b.dq, rows.begin);
      add_rows(&g.dk, b.dk, plan.chunks[size_t(kc)].kv_cols.begin);
      add_rows(&g.dv, b.dv, plan.chunks[size_t(kc)].kv_cols.begin);
    }
  }
  return g;
}

}  // namespace flexattn::cp
