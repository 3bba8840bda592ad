// A plan executed on the CPU (every rank's pieces through the oracle, merged per query chunk) equals
// the unsplit oracle, forward and backward, for both layouts, several world sizes, GQA, a score_mod
// reading positions, and lengths that are not block multiples. The comparisons include masks where
// the plan skips shards, so skipping is shown to drop nothing.
#include <gtest/gtest.h>

#include "cp_test_util.h"

namespace {

using namespace cp_test;
using flexattn::cp::cpu_plan_backward;
using flexattn::cp::cpu_plan_forward;
using flexattn::cp::Layout;
using flexattn::cp::plan_shards;
using flexattn::cp::ShardPlan;
namespace cpu = flexattn::cpu;

constexpr double kTol = 1e-12;

int skipped_count(const ShardPlan& p) {
  int n = 0;
  for (const auto& r : p.ranks) n += int(r.skipped_shards.size());
  return n;
}

void check_run(const flexattn::BlockMask& bm, const ModFns& mods, int world, Layout layout, uint64_t seed,
               const std::string& what) {
  const WholeProblem w = whole_problem(bm, mods, seed);
  const HostTensor &q = w.q, &k = w.k, &v = w.v, &dout = w.dout, &dlse = w.dlse;

  const ShardPlan plan = plan_shards(bm, world, layout);
  cpu::Options o;
  o.threads = 2;
  const flexattn::cp::Merged got = cpu_plan_forward(plan, bm, q, k, v, mods, o);
  expect_forward_close(got.out, got.lse, w.want, kTol, what);
  const cpu::BackwardResult g = cpu_plan_backward(plan, bm, q, k, v, dout, &dlse, mods, o);
  expect_grads_close(g.dq, g.dk, g.dv, w.want_g, kTol, what);
}

TEST(PlanRun, SelfAttentionMatchesUnsplit) {
  // 45 positions in blocks of 4: 11 blocks and a tail of 1.
  const int64_t len = 45;
  int skipped = 0;
  for (const NamedMask& m : self_masks(len)) {
    const flexattn::BlockMask bm = flexattn::build_block_mask(flexattn::MaskFn(m.fn), 1, 4, len, len, 4, 4, 1);
    for (Layout layout : {Layout::contiguous, Layout::zigzag})
      for (int world : {2, 3}) {
        check_run(bm, softcap_mods(m.fn), world, layout, 7,
                  m.name + " " + layout_name(layout) + " N=" + std::to_string(world));
        skipped += skipped_count(plan_shards(bm, world, layout));
      }
  }
  EXPECT_GT(skipped, 0);  // the sweep does exercise skipping
}

TEST(PlanRun, PerBatchMaskAndCrossAttention) {
  // A [B=2, H=1] mask (batch 1 sees a shorter prefix) over q_len 30, kv_len 45.
  const Mask m = [](int64_t b, int64_t, int64_t q, int64_t kv) { return kv * 30 <= q * 45 && kv < (b ? 40 : 45); };
  const flexattn::BlockMask bm = flexattn::build_block_mask(flexattn::MaskFn(m), 2, 1, 30, 45, 4, 4, 1);
  for (Layout layout : {Layout::contiguous, Layout::zigzag})
    check_run(bm, softcap_mods(m), 2, layout, 11, std::string("cross ") + layout_name(layout));
}

TEST(PlanRun, NoScoreModAndEmptyRows) {
  // Rows with nothing to attend (the first 9) stay out 0, lse -inf, with zero gradients.
  const Mask m = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv + 9 <= q; };
  const flexattn::BlockMask bm = flexattn::build_block_mask(flexattn::MaskFn(m), 1, 1, 40, 40, 4, 4, 1);
  ModFns plain;
  plain.mask_mod = m;
  check_run(bm, plain, 4, Layout::zigzag, 13, "shifted causal");
  const HostTensor q = random_tensor({2, 4, 40, 8}, 1), k = random_tensor({2, 2, 40, 8}, 2);
  const HostTensor v = random_tensor({2, 2, 40, 5}, 3);
  const auto r = cpu_plan_forward(plan_shards(bm, 4, Layout::zigzag), bm, q, k, v, plain);
  EXPECT_EQ(r.lse.get(0), -INFINITY);
  EXPECT_EQ(r.out.get(0), 0.0);
  EXPECT_FALSE(any_nan(r.out));
}

}  // namespace
