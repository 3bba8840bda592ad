// Every argument error of the CPU reference, with its message.
#include <gtest/gtest.h>

#include "reference_test_util.h"

namespace flexattn::cpu {
namespace {

using testing::make_block_mask;
using testing::random_tensor;

// Runs fn, expecting a flexattn::Error whose message contains `needle`.
template <typename F>
void expect_error(F fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one containing: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

struct Inputs {
  HostTensor q = random_tensor({2, 4, 5, 3}, 1), k = random_tensor({2, 2, 6, 3}, 2),
             v = random_tensor({2, 2, 6, 7}, 3), dout = random_tensor({2, 4, 5, 7}, 4),
             dlse = random_tensor({2, 4, 5}, 5);
  void fwd(const Options& o = {}) const { forward(q, k, v, {}, o); }
  void bwd(const Options& o = {}) const { backward(q, k, v, dout, &dlse, {}, o); }
};

TEST(ReferenceErrors, Rank) {
  Inputs in;
  in.q = random_tensor({4, 5, 3}, 1);
  expect_error([&] { in.fwd(); }, "q must be a 4-D tensor [B, Hq, L, D]; got rank 3 [4, 5, 3]");
  in = Inputs();
  in.k = random_tensor({1, 2, 2, 6, 3}, 1);
  expect_error([&] { in.fwd(); }, "k must be a 4-D tensor [Bkv, Hkv, S, D]; got rank 5");
  in = Inputs();
  in.v = HostTensor(DType::F32, {});
  expect_error([&] { in.bwd(); }, "v must be a 4-D tensor [Bkv, Hkv, S, Dv]; got rank 0");
}

TEST(ReferenceErrors, Dtype) {
  Inputs in;
  in.k = HostTensor(DType::I32, {2, 2, 6, 3});
  expect_error([&] { in.fwd(); }, "k must have a float dtype (f16, bf16, f32, f64); got i32");
  in = Inputs();
  in.dout = HostTensor(DType::Bool, {2, 4, 5, 7});
  expect_error([&] { in.bwd(); }, "dout must have a float dtype (f16, bf16, f32, f64); got bool");
  in = Inputs();
  in.dlse = HostTensor(DType::I64, {2, 4, 5});
  expect_error([&] { in.bwd(); }, "dlse must have a float dtype (f16, bf16, f32, f64); got i64");
}

TEST(ReferenceErrors, MalformedTensors) {
  Inputs in;
  in.q.bytes.resize(7);
  expect_error([&] { in.fwd(); }, "q holds 7 bytes but shape [2, 4, 5, 3] of f64 needs 960");
  in = Inputs();
  in.v.shape = {2, 2, -6, 7};
  expect_error([&] { in.fwd(); }, "v has a negative dimension: [2, 2, -6, 7]");
  in = Inputs();
  in.q = random_tensor({2, 4, 5, 0}, 1);
  in.k = random_tensor({2, 2, 6, 0}, 1);
  expect_error([&] { in.fwd(); }, "q head dim D (q.shape[3]) must be >= 1; got 0");
  // A shape whose element count wraps int64 (to 0, matching empty bytes) passed the size check and crashed.
  in = Inputs();
  in.q.shape = {1, int64_t(1) << 32, int64_t(1) << 32, 4};
  in.q.bytes.clear();
  expect_error([&] { in.fwd(); }, "tensor shape [1, 4294967296, 4294967296, 4] has more than 2^63 elements");
  in.q.shape = {1, 1, int64_t(1) << 31, int64_t(1) << 31};  // 2^62 elements of 8 bytes: the byte count wraps
  expect_error([&] { in.fwd(); }, "tensor shape [1, 1, 2147483648, 2147483648] has more bytes than size_t holds");
  expect_error([&] { HostTensor(DType::F32, {2, -1}); }, "HostTensor: negative dimension in shape [2, -1]");
}

TEST(ReferenceErrors, Shapes) {
  Inputs in;
  in.k = random_tensor({2, 2, 6, 4}, 2);
  expect_error([&] { in.fwd(); }, "k head dim (k.shape[3]) must equal the q head dim D=3; got 4");
  in = Inputs();
  in.v = random_tensor({2, 2, 5, 7}, 3);
  expect_error([&] { in.fwd(); }, "v must match k in [Bkv, Hkv, S] = [2, 2, 6]; got v shape [2, 2, 5, 7]");
  in = Inputs();
  in.k = random_tensor({2, 3, 6, 3}, 2);
  in.v = random_tensor({2, 3, 6, 7}, 3);
  expect_error([&] { in.fwd(); }, "q heads Hq=4 must be a multiple of the k/v heads Hkv=3 (GQA)");
  in.k = random_tensor({2, 0, 6, 3}, 2);
  in.v = random_tensor({2, 0, 6, 7}, 3);
  expect_error([&] { in.fwd(); }, "q heads Hq=4 must be a multiple of the k/v heads Hkv=0 (GQA)");
  in = Inputs();
  in.k = random_tensor({3, 2, 6, 3}, 2);
  in.v = random_tensor({3, 2, 6, 7}, 3);
  expect_error([&] { in.fwd(); }, "k/v batch Bkv=3 must equal the q batch B=2 or be 1 (broadcast)");
}

TEST(ReferenceErrors, GradientShapes) {
  Inputs in;
  in.dout = random_tensor({2, 4, 5, 3}, 4);
  expect_error([&] { in.bwd(); }, "dout must have shape [B, Hq, L, Dv] = [2, 4, 5, 7]; got [2, 4, 5, 3]");
  in = Inputs();
  in.dlse = random_tensor({2, 4, 5, 1}, 5);
  expect_error([&] { in.bwd(); }, "dlse must have shape [B, Hq, L] = [2, 4, 5]; got [2, 4, 5, 1]");
  in = Inputs();
  in.dlse.bytes.resize(3);
  expect_error([&] { in.bwd(); }, "dlse holds 3 bytes but shape [2, 4, 5] of f64 needs 320");
}

TEST(ReferenceErrors, Threads) {
  Inputs in;
  Options o;
  o.threads = -2;
  expect_error([&] { in.fwd(o); }, "options.threads must be >= 0 (0 = hardware concurrency); got -2");
  expect_error([&] { resolve_threads(-1); }, "options.threads must be >= 0");
  Options inf_scale;
  inf_scale.scale = std::numeric_limits<double>::infinity();  // gave NaN outputs without a word
  expect_error([&] { in.fwd(inf_scale); }, "options.scale must be finite (NaN = 1/sqrt(D)); got inf");
  EXPECT_EQ(resolve_threads(3), 3);
  EXPECT_GE(resolve_threads(0), 1);
  // buffer_grad's per-thread accumulators (VariantFns) sized for fewer threads than the backward runs: the index
  // landed past them (a heap overflow with VariantFns(..., 1) and the default Options on a 2-core machine).
  ModFns mods;
  int calls = 0;
  mods.buffer_grad = [&](int, double, int64_t, int64_t, int64_t, int64_t, double) { ++calls; };
  mods.buffer_grad_threads = 1;
  o.threads = 2;
  expect_error([&] { backward(in.q, in.k, in.v, in.dout, &in.dlse, mods, o); },
               "options.threads: the backward runs 2 threads but the mods' buffer_grad accumulates for 1 (give "
               "VariantFns the same threads as Options::threads)");
  EXPECT_EQ(calls, 0);
  o.threads = 1;
  backward(in.q, in.k, in.v, in.dout, &in.dlse, mods, o);
  EXPECT_EQ(calls, 2 * 4 * 5 * 6);  // once per kept entry
}

TEST(ReferenceErrors, BlockMaskShape) {
  Inputs in;  // L = 5, S = 6
  Options o;
  BlockMask bm = make_block_mask(1, 1, 8, 6, 2, 2, std::vector<int>(4 * 3, 1));
  o.block_mask = &bm;
  expect_error([&] { in.fwd(o); }, "block_mask was built for q_len=8, kv_len=6; got q_len=5, kv_len=6");
  bm = make_block_mask(3, 1, 5, 6, 2, 2, std::vector<int>(3 * 3 * 3, 1));
  expect_error([&] { in.bwd(o); }, "block_mask batch B=3 must be 1 or the q batch 2");
  bm = make_block_mask(1, 2, 5, 6, 2, 2, std::vector<int>(2 * 3 * 3, 1));
  expect_error([&] { in.fwd(o); }, "block_mask heads H=2 must be 1 or the q heads 4");
  bm = make_block_mask(1, 1, 5, 6, 2, 2, std::vector<int>(3 * 3, 1));
  bm.q_block = 0;
  expect_error([&] { in.fwd(o); }, "block_mask block size (q_block, kv_block) must be positive; got (0, 2)");
  bm = make_block_mask(1, 1, 5, 6, 2, 2, std::vector<int>(3 * 3, 1));
  bm.nkv = 4;
  expect_error([&] { in.fwd(o); },
               "block_mask (nq, nkv) must be ceil(q_len/q_block), ceil(kv_len/kv_block) = (3, 3); got (3, 4)");
}

TEST(ReferenceErrors, BlockMaskContents) {
  Inputs in;
  Options o;
  BlockMask bm;
  o.block_mask = &bm;
  auto fresh = [&] { bm = make_block_mask(1, 1, 5, 6, 2, 2, {1, 2, 0, 0, 1, 1, 2, 0, 0}); };
  fresh();
  in.fwd(o);  // valid as built
  bm.kv_num_blocks.pop_back();
  expect_error([&] { in.fwd(o); }, "block_mask.kv_num_blocks must have B*H*nq = 3 entries; got 2");
  fresh();
  bm.full_kv_indices.resize(4);
  expect_error([&] { in.fwd(o); }, "block_mask.full_kv_indices must have B*H*nq*nkv = 9 entries; got 4");
  fresh();
  bm.kv_num_blocks[1] = 4;
  expect_error([&] { in.fwd(o); }, "block_mask.kv_num_blocks[0, 0, 1] must be in [0, 3]; got 4");
  fresh();
  bm.full_kv_indices[0] = 3;  // row 0's full block
  expect_error([&] { in.fwd(o); }, "block_mask.full_kv_indices[0, 0, 0][0] must be a kv block in [0, 3); got 3");
  fresh();
  bm.kv_indices[0] = -1;
  expect_error([&] { in.fwd(o); }, "block_mask.kv_indices[0, 0, 0][0] must be a kv block in [0, 3); got -1");
  fresh();
  bm.full_kv_indices[0] = 0;  // row 0: block 0 partial and full
  expect_error([&] { in.fwd(o); }, "block_mask lists kv block 0 of query block row [0, 0, 0] in both kv_indices and "
                                   "full_kv_indices; the partial and full sets must be disjoint and without repeats");
  fresh();
  bm.kv_indices[3 + 1] = 1;  // row 1 lists partial blocks {1, 2}: make it {1, 1}
  expect_error([&] { in.fwd(o); }, "block_mask lists kv block 1 of query block row [0, 0, 1] twice in kv_indices");
  fresh();
  bm.has_full = false;
  expect_error([&] { in.fwd(o); },
               "block_mask.has_full is false but full_kv_num_blocks/full_kv_indices are not empty");
}

}  // namespace
}  // namespace flexattn::cpu
