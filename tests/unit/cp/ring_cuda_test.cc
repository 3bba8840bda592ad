// The GPU ring without a GPU: its device kernels compile with NVRTC for sm_80 and sm_90a (no
// spills), and ring_forward / ring_backward check their arguments, including the refusal of variants
// that read positions, before the first device call.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "cp/ring_kernels.h"
#include "flexattn/cp_nccl.h"
#include "flexattn/error.h"
#include "flexattn/expr.h"
#include "flexattn/jit.h"
#include "error_of.h"

using flexattn::test::error_of;

namespace {

namespace cp = flexattn::cp;
namespace ir = flexattn::ir;
using flexattn::DType;
using flexattn::TensorView;

TEST(RingKernels, CompileForAmpereAndHopper) {
  const flexattn::jit::JitInfo info = flexattn::jit::jit_info();
  if (!info.nvrtc_found) GTEST_SKIP() << "NVRTC not available: " << info.nvrtc_error;
  const std::string dir = (std::filesystem::temp_directory_path() / "flexattn_cp_ring_kernels_XXXXXX").string();
  std::vector<char> buf(dir.begin(), dir.end());
  buf.push_back('\0');
  ASSERT_NE(mkdtemp(buf.data()), nullptr);
  setenv("FLEXATTN_CACHE_DIR", buf.data(), 1);
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const flexattn::jit::CompiledKernel k = flexattn::jit::get_or_compile(cp::kernels::request(arch));
    EXPECT_FALSE(k.cubin->empty()) << arch;
    for (const char* name : {"cp_fold", "cp_add_rows", "cp_store", "cp_slice_or_fill"}) {
      ASSERT_TRUE(k.ptxas.count(name)) << arch << " " << name;
      EXPECT_EQ(k.ptxas.at(name).spill_stores + k.ptxas.at(name).spill_loads, 0) << arch << " " << name;
    }
  }
  unsetenv("FLEXATTN_CACHE_DIR");
  std::filesystem::remove_all(buf.data());
}

// Rank 0 of a 2-rank zigzag plan over 32 positions in blocks of 4: chunks 0 and 3, 16 rows, a shard of 16.
struct RankZero {
  flexattn::BlockMask bm = flexattn::build_block_mask(
      flexattn::MaskFn([](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; }), 1, 1, 32, 32, 4, 4, 1);
  cp::ShardPlan plan = cp::plan_shards(bm, 2, cp::Layout::zigzag);
  flexattn::Variant plain{ir::tanh(ir::score() * 0.5), ir::head() < 3, {}};
  cp::RingForwardArgs args;
  RankZero() {
    args.plan = &plan;
    args.local.variant = &plain;
    args.local.q = {nullptr, DType::BF16, {1, 2, 16, 16}, {}};
    args.local.k = {nullptr, DType::BF16, {1, 2, 16, 16}, {}};
    args.local.v = {nullptr, DType::BF16, {1, 2, 16, 16}, {}};
    args.local.out = {nullptr, DType::BF16, {1, 2, 16, 16}, {}};
  }
};

TEST(RingCuda, UserOffsetsAreRefusedThePlanSetsThem) {
  RankZero s;
  s.args.local.q_offset = 5;
  EXPECT_EQ(error_of([&] { cp::ring_forward(s.args); }),
            "ring_forward: local.q_offset and local.kv_offset must be 0 (the ring sets each piece's positions from "
            "the plan); got 5 and 0");
  cp::RingBackwardArgs b;
  b.fwd = s.args;
  b.fwd.local.q_offset = 0, b.fwd.local.kv_offset = 7;
  EXPECT_NE(error_of([&] { cp::ring_backward(b); }).find("ring_backward: local.q_offset and local.kv_offset must "
                                                         "be 0"),
            std::string::npos);
}

TEST(RingCuda, ArgumentErrorsBeforeAnyDeviceCall) {
  RankZero s;
  cp::RingForwardArgs a = s.args;
  a.plan = nullptr;
  EXPECT_EQ(error_of([&] { cp::ring_forward(a); }), "ring_forward: plan is null; make one with plan_shards");
  a = s.args, a.rank = 2;
  EXPECT_EQ(error_of([&] { cp::ring_forward(a); }), "ring_forward: rank must be in [0, 2); got 2");
  a = s.args, a.local.variant = nullptr;
  EXPECT_EQ(error_of([&] { cp::ring_forward(a); }), "ring_forward: local.variant is null");
  a = s.args, a.local.q.shape[2] = 32;
  EXPECT_EQ(error_of([&] { cp::ring_forward(a); }),
            "ring_forward: local.q must hold rank 0's 16 rows (its chunks' q rows, ascending chunk order); got "
            "[1, 2, 32, 16]");
  a = s.args, a.local.q.dtype = DType::F32;
  EXPECT_EQ(error_of([&] { cp::ring_forward(a); }), "ring_forward: local.q must be bf16 or f16; got f32");
  a = s.args, a.local.k.shape[2] = 8;
  EXPECT_EQ(error_of([&] { cp::ring_forward(a); }),
            "ring_forward: local.k and local.v must hold rank 0's shard of 16 positions; got k [1, 2, 8, 16], v "
            "[1, 2, 16, 16]");
  a = s.args, a.local.v.strides = {1024, 16, 32, 1};
  EXPECT_EQ(error_of([&] { cp::ring_forward(a); }),
            "ring_forward: local.k and local.v must be contiguous (they are sent as bytes)");
  a = s.args, a.local.out.shape[3] = 8;
  EXPECT_EQ(error_of([&] { cp::ring_forward(a); }),
            "ring_forward: local.out must be [B, Hq, L_rank, Dv] = [1, 2, 16, 16] of bf16; got [1, 2, 16, 8] of bf16");
  a = s.args;
  const size_t need = cp::ring_forward_workspace_bytes(a);
  EXPECT_EQ(error_of([&] { cp::ring_forward(a); }),
            "ring_forward: workspace needs " + std::to_string(need) + " bytes (ring_forward_workspace_bytes), got 0");
  alignas(256) static char ws[512];
  a.workspace = ws + 16, a.workspace_bytes = need;
  EXPECT_EQ(error_of([&] { cp::ring_forward(a); }), "ring_forward: workspace must be 256-byte aligned");
  a.workspace = ws;
  EXPECT_EQ(error_of([&] { cp::ring_forward(a); }), "ring_forward: comm is null; create one with nccl_init");

  cp::RingBackwardArgs b;
  b.fwd = s.args;
  EXPECT_EQ(error_of([&] { cp::ring_backward(b); }),
            "ring_backward: fwd.local.lse is null; the backward needs ring_forward's lse");
  static float lse[1];
  b.fwd.local.lse = lse;
  b.dout = s.args.local.out;
  b.dq = s.args.local.q;
  b.dk = s.args.local.k;
  b.dv = {nullptr, DType::F16, {1, 2, 16, 16}, {}};
  EXPECT_EQ(error_of([&] { cp::ring_backward(b); }),
            "ring_backward: dv must be [1, 2, 16, 16] of bf16; got [1, 2, 16, 16] of f16");
  b.dv = s.args.local.v;
  const size_t need_b = cp::ring_backward_workspace_bytes(b);
  EXPECT_GT(need_b, need);  // accumulators, dq and the piece backward's own workspace on top
  b.workspace = ws, b.workspace_bytes = need_b;
  EXPECT_EQ(error_of([&] { cp::ring_backward(b); }), "ring_backward: comm is null; create one with nccl_init");
}

TEST(RingCuda, WorkspaceHoldsTwoShardsAndTheRunningResult) {
  RankZero s;
  // Two bf16 shards of 16 positions (k and v, 2 heads, d 16), fp32 out/lse of 16 rows, one chunk's partial.
  const size_t shard = 2 * 2 * 16 * 16 * 2, acc_out = 2 * 16 * 16 * 4, acc_lse = 2 * 16 * 4;
  const size_t part_out = 2 * 8 * 16 * 2, part_lse = 2 * 8 * 4;
  const auto a256 = [](size_t n) { return (n + 255) / 256 * 256; };
  EXPECT_EQ(cp::ring_forward_workspace_bytes(s.args),
            2 * a256(shard) + a256(acc_out) + a256(acc_lse) + a256(part_out) + a256(part_lse));
}

}  // namespace
