// The ring executor with N threads exchanging buffers through the in-process transport equals the
// unsplit oracle, forward and backward (dk/dv travelling with the kv and returned in one hop), for
// causal, document and sliding-window masks, both layouts, N = 1..4, GQA and a position-reading
// score_mod. The transport poisons buffers in flight, so a schedule that reused one too early fails.
#include <gtest/gtest.h>

#include <exception>
#include <thread>

#include "cp/ring.h"
#include "cp_test_util.h"

namespace {

using namespace cp_test;
using flexattn::cp::InProcessHub;
using flexattn::cp::Layout;
using flexattn::cp::plan_shards;
using flexattn::cp::ShardPlan;
namespace cp = flexattn::cp;
namespace cpu = flexattn::cpu;

constexpr double kTol = 1e-12;

// Runs fn(rank) on N threads; the first failure aborts the others and is rethrown.
template <class Fn>
void run_ranks(InProcessHub& hub, int n, Fn fn) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
        hub.abort();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

struct RingRun {
  cp::Merged fwd;
  cpu::BackwardResult grads;
  std::vector<int64_t> messages;  // per rank, forward + backward
};

RingRun ring_run(const ShardPlan& plan, const flexattn::BlockMask& bm, const HostTensor& q, const HostTensor& k,
                 const HostTensor& v, const HostTensor& dout, const HostTensor& dlse, const ModFns& mods) {
  const int n = plan.world_size;
  RingRun r{{HostTensor(DType::F64, {q.shape[0], q.shape[1], q.shape[2], v.shape[3]}),
             HostTensor(DType::F64, {q.shape[0], q.shape[1], q.shape[2]})},
            {HostTensor(DType::F64, q.shape), HostTensor(DType::F64, k.shape), HostTensor(DType::F64, v.shape)},
            {}};
  cpu::Options o;
  o.threads = 1;
  InProcessHub hub(n);
  std::vector<cp::Merged> local(static_cast<size_t>(n));
  run_ranks(hub, n, [&](int rank) {
    const HostTensor ql = cp::gather_rank(plan, rank, q, false), kl = cp::gather_rank(plan, rank, k, true),
                     vl = cp::gather_rank(plan, rank, v, true);
    local[size_t(rank)] = cp::cpu_ring_forward(plan, rank, hub.transport(rank), bm, ql, kl, vl, mods, o);
  });
  InProcessHub hub_b(n);
  std::vector<cpu::BackwardResult> grads(static_cast<size_t>(n));
  run_ranks(hub_b, n, [&](int rank) {
    const HostTensor ql = cp::gather_rank(plan, rank, q, false), kl = cp::gather_rank(plan, rank, k, true),
                     vl = cp::gather_rank(plan, rank, v, true);
    const HostTensor dl = cp::gather_rank(plan, rank, dout, false), sl = cp::gather_rank(plan, rank, dlse, false);
    const cp::Merged& f = local[size_t(rank)];
    grads[size_t(rank)] =
        cp::cpu_ring_backward(plan, rank, hub_b.transport(rank), bm, ql, kl, vl, f.out, f.lse, dl, &sl, mods, o);
  });
  for (int rank = 0; rank < n; ++rank) {
    cp::scatter_rank(plan, rank, local[size_t(rank)].out, false, &r.fwd.out);
    cp::scatter_rank(plan, rank, local[size_t(rank)].lse, false, &r.fwd.lse);
    cp::scatter_rank(plan, rank, grads[size_t(rank)].dq, false, &r.grads.dq);
    cp::scatter_rank(plan, rank, grads[size_t(rank)].dk, true, &r.grads.dk);
    cp::scatter_rank(plan, rank, grads[size_t(rank)].dv, true, &r.grads.dv);
    r.messages.push_back(hub.messages_sent(rank) + hub_b.messages_sent(rank));
  }
  return r;
}

void check_ring(const flexattn::BlockMask& bm, const ModFns& mods, int world, Layout layout, uint64_t seed,
                const std::string& what) {
  const WholeProblem w = whole_problem(bm, mods, seed);
  const HostTensor &q = w.q, &k = w.k, &v = w.v, &dout = w.dout, &dlse = w.dlse;

  const ShardPlan plan = plan_shards(bm, world, layout);
  const RingRun got = ring_run(plan, bm, q, k, v, dout, dlse, mods);
  expect_forward_close(got.fwd.out, got.fwd.lse, w.want, kTol, what);
  expect_grads_close(got.grads.dq, got.grads.dk, got.grads.dv, w.want_g, kTol, what);
  // Forward: T-1 kv hops; backward: T-1 kv hops, T-1 accumulator hops and the return hop (T >= 2).
  const int64_t T = plan.ring_steps;
  const int64_t want_msgs = T >= 2 ? (T - 1) * 3 + 1 : 0;
  for (int rank = 0; rank < world; ++rank) EXPECT_EQ(got.messages[size_t(rank)], want_msgs) << what << " rank " << rank;
}

TEST(Ring, MatchesUnsplitForEveryMaskLayoutAndWorldSize) {
  const int64_t len = 45;  // 12 blocks of 4, the last one a tail of 1
  for (const NamedMask& m : self_masks(len)) {
    const flexattn::BlockMask bm = flexattn::build_block_mask(flexattn::MaskFn(m.fn), 1, 4, len, len, 4, 4, 1);
    for (Layout layout : {Layout::contiguous, Layout::zigzag})
      for (int world : {1, 2, 3, 4})
        check_ring(bm, softcap_mods(m.fn), world, layout, 17,
                   m.name + " " + layout_name(layout) + " N=" + std::to_string(world));
  }
}

TEST(Ring, TruncatedRingSendsFewerHops) {
  // A window of 5 back with contiguous chunks needs only the previous shard: 2 steps for N = 4.
  const Mask m = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q && q - kv < 5; };
  const flexattn::BlockMask bm = flexattn::build_block_mask(flexattn::MaskFn(m), 1, 1, 64, 64, 4, 4, 1);
  const ShardPlan plan = plan_shards(bm, 4, Layout::contiguous);
  ASSERT_EQ(plan.ring_steps, 2);
  check_ring(bm, softcap_mods(m), 4, Layout::contiguous, 23, "window N=4");
}

TEST(Ring, PerBatchMaskCrossAttentionAndNothingToDo) {
  const Mask m = [](int64_t b, int64_t, int64_t q, int64_t kv) { return kv * 30 <= q * 45 && kv < (b ? 40 : 45); };
  const flexattn::BlockMask bm = flexattn::build_block_mask(flexattn::MaskFn(m), 2, 1, 30, 45, 4, 4, 1);
  for (Layout layout : {Layout::contiguous, Layout::zigzag})
    check_ring(bm, softcap_mods(m), 3, layout, 29, std::string("cross ") + layout_name(layout));
  // A mask with no True element: no step computes, nothing is sent, everything is zero / -inf.
  const Mask none = [](int64_t, int64_t, int64_t, int64_t) { return false; };
  const flexattn::BlockMask empty = flexattn::build_block_mask(flexattn::MaskFn(none), 1, 1, 32, 32, 4, 4, 1);
  ModFns plain;
  plain.mask_mod = none;
  check_ring(empty, plain, 3, Layout::zigzag, 31, "empty mask");
}

}  // namespace
