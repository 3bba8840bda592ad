// Every user-facing error of the context-parallel API: it names the argument and what was expected.
#include <gtest/gtest.h>

#include "cp_test_util.h"

namespace {

using namespace cp_test;
namespace cp = flexattn::cp;
namespace cpu = flexattn::cpu;

void expect_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << fragment;
  } catch (const flexattn::Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "message: " << e.what();
  }
}

HostTensor t(std::vector<int64_t> shape, DType dtype = DType::F64) { return HostTensor(dtype, std::move(shape)); }

TEST(CpErrors, Merge) {
  const HostTensor o = t({1, 2, 3, 4}), l = t({1, 2, 3});
  expect_error([&] { cp::merge_attention({}, {}); }, "merge_attention: outs must hold at least one partial result");
  expect_error([&] { cp::merge_attention({o, o}, {l}); },
               "merge_attention: lses must hold one lse per partial out (outs has 2); got 1");
  expect_error([&] { cp::merge_attention({t({2, 3, 4})}, {l}); },
               "merge_attention: outs[0] must be a 4-D tensor [B, H, L, Dv]; got rank 3");
  expect_error([&] { cp::merge_attention({o, t({1, 2, 3, 5})}, {l, l}); },
               "merge_attention: outs[1] must have the shape of outs[0] [1, 2, 3, 4]; got [1, 2, 3, 5]");
  expect_error([&] { cp::merge_attention({o}, {t({1, 2, 4})}); },
               "merge_attention: lses[0] must have shape [B, H, L] = [1, 2, 3]");
  expect_error([&] { cp::merge_attention({o}, {t({1, 2, 3}, DType::I32)}); },
               "merge_attention: lses[0] must have a float dtype");
  HostTensor short_bytes = o;
  short_bytes.bytes.resize(8);
  expect_error([&] { cp::merge_attention({short_bytes}, {l}); }, "merge_attention: outs[0] holds 8 bytes");
}

TEST(CpErrors, MergeBackward) {
  const HostTensor o = t({1, 2, 3, 4}), l = t({1, 2, 3});
  expect_error([&] { cp::merge_attention_backward({o}, {l}, t({1, 2, 3, 5}), nullptr); },
               "merge_attention_backward: dout must have the shape of outs[0] [1, 2, 3, 4]; got [1, 2, 3, 5]");
  const HostTensor bad = t({1, 2, 2});
  expect_error([&] { cp::merge_attention_backward({o}, {l}, o, &bad); },
               "merge_attention_backward: dlse must have the shape of lses[0] [1, 2, 3]; got [1, 2, 2]");
  expect_error([&] { cp::merge_attention_backward({}, {}, o, nullptr); }, "merge_attention_backward: outs must hold");
}

flexattn::BlockMask causal(int64_t len, int block) {
  return flexattn::build_block_mask(
      flexattn::MaskFn([](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; }), 1, 1, len, len, block, block,
      1);
}

TEST(CpErrors, SlicesAndOffsets) {
  const flexattn::BlockMask bm = causal(32, 8);
  expect_error([&] { cp::slice_blocks(bm, 2, 2, 0, 4); },
               "slice_blocks: query block range must satisfy 0 <= begin < end <= nq = 4; got [2, 2)");
  expect_error([&] { cp::slice_blocks(bm, 0, 4, 0, 5); },
               "slice_blocks: kv block range must satisfy 0 <= begin < end <= nkv = 4; got [0, 5)");
  flexattn::BlockMask broken = bm;
  broken.kv_num_blocks[0] = 9;
  expect_error([&] { cp::slice_blocks(broken, 0, 1, 0, 1); }, "slice_blocks: bm is malformed:");
  expect_error([&] { cp::slice_seq(t({2, 3}), 0, 1); }, "slice_seq: t must be a 3-D [B, H, L] or 4-D");
  expect_error([&] { cp::slice_seq(t({1, 1, 5, 2}), 3, 6); },
               "slice_seq: the range must satisfy 0 <= begin <= end <= L = 5; got [3, 6)");
}

TEST(CpErrors, Planner) {
  const flexattn::BlockMask bm = causal(40, 8);  // 5 blocks
  expect_error([&] { cp::plan_shards(bm, 0, cp::Layout::contiguous); }, "plan_shards: world_size must be >= 1; got 0");
  expect_error([&] { cp::plan_shards(bm, 3, cp::Layout::zigzag); },
               "plan_shards: the zigzag layout cuts the sequence into 6 chunks of whole blocks, but bm has only 5 q "
               "blocks (q_len=40, q_block=8); use fewer ranks (world_size) or smaller blocks");
  expect_error([&] { cp::plan_shards(bm, 2, cp::Layout(7)); },
               "plan_shards: layout must be Layout::contiguous or Layout::zigzag; got 7");
  expect_error([&] { cp::plan_shards(bm, 2, cp::Layout::contiguous, {0.0}); },
               "plan_shards: options.partial_weight must be finite and > 0");
  expect_error([&] { cp::plan_shards(bm, 2, cp::Layout::contiguous, {NAN}); },
               "plan_shards: options.partial_weight must be finite and > 0");
  flexattn::BlockMask broken = bm;
  broken.kv_indices.pop_back();
  expect_error([&] { cp::plan_shards(broken, 2, cp::Layout::contiguous); }, "plan_shards: bm is malformed:");
  expect_error([&] { cp::chunks_of_rank(4, 4, cp::Layout::zigzag); },
               "chunks_of_rank: rank must be in [0, world_size = 4); got 4");
  expect_error([&] { cp::chunks_of_rank(0, 0, cp::Layout::zigzag); }, "chunks_of_rank: world_size must be >= 1");
}

TEST(CpErrors, PlanExecution) {
  const flexattn::BlockMask bm = causal(32, 8);
  const cp::ShardPlan plan = cp::plan_shards(bm, 2, cp::Layout::zigzag);
  const HostTensor q = t({1, 2, 32, 4}), k = t({1, 2, 32, 4}), v = t({1, 2, 32, 3});
  cpu::Options with_mask;
  with_mask.block_mask = &bm;
  expect_error([&] { cp::cpu_plan_forward(plan, bm, q, k, v, {}, with_mask); },
               "cpu_plan_forward: options.block_mask must be null; the plan's block mask is the argument bm");
  const flexattn::BlockMask other = causal(40, 8);
  expect_error([&] { cp::cpu_plan_forward(plan, other, q, k, v, {}); },
               "cpu_plan_forward: bm must be the mask the plan was made from; its q_len is 40 but the plan's is 32");
  expect_error([&] { cp::cpu_plan_forward(plan, bm, t({1, 2, 31, 4}), k, v, {}); },
               "cpu_plan_forward: q has L = 31 rows but the plan was made for q_len = 32");
  expect_error([&] { cp::cpu_plan_forward(plan, bm, q, t({1, 2, 30, 4}), v, {}); },
               "cpu_plan_forward: k and v must have S = kv_len = 32 positions");
  cp::ShardPlan truncated = plan;
  truncated.chunks.pop_back();
  expect_error([&] { cp::cpu_plan_forward(truncated, bm, q, k, v, {}); }, "cpu_plan_forward: plan is malformed");
  cp::ShardPlan twice = plan;
  twice.ranks[0].steps[0].pieces.push_back(twice.ranks[0].steps[0].pieces[0]);
  expect_error([&] { cp::cpu_plan_forward(twice, bm, q, k, v, {}); },
               "cpu_plan_forward: plan is malformed: piece (0, 0) is listed twice");
  cp::ShardPlan outside = plan;
  outside.ranks[1].steps[0].pieces[0].kv_chunk = 9;
  expect_error([&] { cp::cpu_plan_backward(outside, bm, q, k, v, t({1, 2, 32, 3}), nullptr, {}); },
               "cpu_plan_backward: plan is malformed: a piece names chunks (1, 9) outside [0, 4)");
  expect_error([&] { cp::cpu_plan_backward(plan, bm, q, k, v, t({1, 2, 32, 4}), nullptr, {}); },
               "cpu_plan_backward: dout must have shape [B, Hq, L, Dv] = [1, 2, 32, 3]; got [1, 2, 32, 4]");
  const HostTensor bad_dlse = t({1, 2, 31});
  expect_error([&] { cp::cpu_plan_backward(plan, bm, q, k, v, t({1, 2, 32, 3}), &bad_dlse, {}); },
               "cpu_plan_backward: dlse must have shape [B, Hq, L]");
}

}  // namespace
