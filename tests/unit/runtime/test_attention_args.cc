// Every argument error of cuda_forward / cuda_backward names the argument and what was expected; the
// checks run before any driver call, so these tests need no GPU.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>

#include "flexattn/attention.h"
#include "flexattn/decode.h"
#include "flexattn/error.h"
#include "flexattn/mods.h"
#include "error_of.h"

using flexattn::test::error_of;

using namespace flexattn;

namespace {

alignas(256) char g_mem[256];

TensorView view(std::vector<int64_t> shape, DType t = DType::BF16) {
  TensorView v;
  v.data = g_mem;
  v.dtype = t;
  v.shape = std::move(shape);
  return v;
}

struct Fixture {
  Variant variant;
  float lse_mem[4] = {};
  ForwardArgs fwd() {
    ForwardArgs a;
    a.variant = &variant;
    a.q = view({2, 4, 33, 64});
    a.k = view({2, 2, 40, 64});
    a.v = view({2, 2, 40, 32});
    a.out = view({2, 4, 33, 32});
    return a;
  }
};

struct ForwardCase {
  const char* what;
  std::function<void(ForwardArgs&)> edit;
  const char* message;
};

TEST(AttentionArgs, ForwardErrorsNameTheArgument) {
  const ForwardCase cases[] = {
      {"variant", [](ForwardArgs& a) { a.variant = nullptr; }, "variant: null"},
      {"q rank", [](ForwardArgs& a) { a.q.shape = {2, 4, 33}; },
       "q: expected a 4-D tensor [B, Hq, L, D], got shape [2, 4, 33]"},
      {"dtype", [](ForwardArgs& a) { a.q.dtype = DType::F32; }, "q: the cuda backend takes bf16 or f16, got f32"},
      {"empty", [](ForwardArgs& a) { a.q.shape[2] = 0; }, "q: every dimension must be at least 1, got [2, 4, 0, 64]"},
      {"kv batch", [](ForwardArgs& a) { a.k.shape[0] = 3, a.v.shape[0] = 3; },
       "k: batch must equal q's batch (2) or be 1, got 3"},
      {"gqa", [](ForwardArgs& a) { a.k.shape[1] = 3, a.v.shape[1] = 3; },
       "k: the number of query heads (4) must be a multiple of the kv heads (3)"},
      {"head dim", [](ForwardArgs& a) { a.q.shape[3] = 40, a.k.shape[3] = 40; },
       "head dims: the cuda backend takes multiples of 16 up to 256, got D=40, Dv=32"},
      {"v shape", [](ForwardArgs& a) { a.v.shape[2] = 41; }, "v: expected shape [2, 2, 40, 32], got [2, 2, 41, 32]"},
      {"out dtype", [](ForwardArgs& a) { a.out.dtype = DType::F16; }, "out: expected dtype bf16, got f16"},
      {"null data", [](ForwardArgs& a) { a.k.data = nullptr; }, "k: no data pointer"},
      {"alignment", [](ForwardArgs& a) { a.out.data = g_mem + 8; }, "out: data must be 16-byte aligned"},
      {"row stride", [](ForwardArgs& a) { a.q.strides = {8448, 2112, 66, 1}; },
       "q: strides must be multiples of 8 elements (16-byte rows), got [8448, 2112, 66, 1]"},
      {"inner stride", [](ForwardArgs& a) { a.q.strides = {8448, 2112, 64, 2}; },
       "q: the last dimension must be contiguous (stride 1)"},
      {"q offset", [](ForwardArgs& a) { a.q_offset = (int64_t(1) << 30) - 10; },
       "q_offset: the positions the mods see are offset + row, in [0, 2^30): expected 0 <= offset and offset + "
       "length <= 2^30, got 1073741814 + 33"},
      {"huge q offset", [](ForwardArgs& a) { a.q_offset = INT64_MAX; },  // offset + length wrapped and passed
       "q_offset: the positions the mods see are offset + row, in [0, 2^30): expected 0 <= offset and offset + "
       "length <= 2^30, got 9223372036854775807 + 33"},
      {"infinite scale", [](ForwardArgs& a) { a.scale = -std::numeric_limits<double>::infinity(); }, "scale: expected a finite number (NaN = 1/sqrt(D)), got -inf"},
      {"kv offset", [](ForwardArgs& a) { a.kv_offset = -1; },
       "kv_offset: the positions the mods see are offset + row, in [0, 2^30): expected 0 <= offset and offset + "
       "length <= 2^30, got -1 + 40"},
      // B * Hq * L = 2^64 wrapped to 0 and passed the row check.
      {"rows past 64 bits",
       [](ForwardArgs& a) {
         a.q.shape = {int64_t(1) << 33, int64_t(1) << 31, 1, 64};
         a.out.shape = {int64_t(1) << 33, int64_t(1) << 31, 1, 32};
         a.k.shape[0] = a.v.shape[0] = 1;
       },
       "q: expected B * Hq * L <= 2^31 rows (32-bit row indices), got shape [8589934592, 2147483648, 1, 64]"},
      {"rows", [](ForwardArgs& a) { a.q.shape[2] = (int64_t(1) << 28) + 1; },
       "q: expected B * Hq * L <= 2^31 rows (32-bit row indices), got shape [2, 4, 268435457, 64]"},
      {"kv rows past 64 bits",
       [](ForwardArgs& a) {
         a.k.shape = {1, 2, int64_t(1) << 62, 64};
         a.v.shape = {1, 2, int64_t(1) << 62, 32};
       },
       "k: expected Bkv * Hkv * S <= 2^31 rows (32-bit row indices), got shape [1, 2, 4611686018427387904, 64]"},
  };
  for (const ForwardCase& c : cases) {
    Fixture f;
    ForwardArgs a = f.fwd();
    c.edit(a);
    EXPECT_EQ(error_of([&] { cuda_forward(a); }), c.message) << c.what;
  }
}

TEST(AttentionArgs, BlockMaskMustMatchTheCall) {
  Fixture f;
  ForwardArgs a = f.fwd();
  DeviceBlockMask m;
  m.kv_num_blocks = reinterpret_cast<const int32_t*>(g_mem);
  m.kv_indices = reinterpret_cast<const int32_t*>(g_mem);
  m.q_len = 32, m.kv_len = 40, m.nq = 1, m.nkv = 1;
  a.block_mask = &m;
  EXPECT_NE(error_of([&] { cuda_forward(a); }).find("block_mask was built for q_len=32, kv_len=40"),
            std::string::npos);
  m.q_len = 33, m.B = 3;
  EXPECT_EQ(error_of([&] { cuda_forward(a); }), "block_mask: batch must be 1 or 2, got 3");
  // A zero block size was divided by before it was checked (SIGFPE).
  m.B = 1, m.q_block = 0;
  EXPECT_EQ(error_of([&] { cuda_forward(a); }), "block_mask: expected q_block and kv_block >= 1, got 0 and 128");
  m.q_block = 128, m.kv_block = 0;
  EXPECT_EQ(error_of([&] { cuda_forward(a); }), "block_mask: expected q_block and kv_block >= 1, got 128 and 0");
}

TEST(AttentionArgs, DecodeRowLimitsDoNotWrap) {
  Variant variant;
  DecodeArgs a;
  a.variant = &variant;
  a.q = view({2, 4, 1, 64});
  a.k = view({2, 2, 40, 64});
  a.v = view({2, 2, 40, 64});
  a.out = view({2, 4, 1, 64});
  // B * Hq * L = 2^64 wrapped to 0 and passed.
  a.q.shape = a.out.shape = {int64_t(1) << 33, int64_t(1) << 31, 1, 64};
  a.k.shape[0] = a.v.shape[0] = 1;
  EXPECT_EQ(error_of([&] { cuda_decode(a); }),
            "q: expected B * Hq * L < 2^31 rows (32-bit row indices), got shape [8589934592, 2147483648, 1, 64]");
  a.q.shape = a.out.shape = {int64_t(1) << 29, 4, 1, 64};
  EXPECT_EQ(error_of([&] { cuda_decode(a); }),
            "q: expected B * Hq * L < 2^31 rows (32-bit row indices), got shape [536870912, 4, 1, 64]");
  // Paged: max_pages * page_size wrapped past 2^63.
  a.q.shape = a.out.shape = {2, 4, 1, 64};
  a.k.shape = a.v.shape = {8, 2, 16, 64};
  a.page_table = reinterpret_cast<const int32_t*>(g_mem);
  a.max_pages = int64_t(1) << 60;
  EXPECT_EQ(error_of([&] { cuda_decode(a); }),
            "max_pages: expected max_pages * page_size < 2^31 rows, got 1152921504606846976 * 16");
  a.max_pages = int64_t(1) << 27;
  EXPECT_EQ(error_of([&] { cuda_decode(a); }),
            "max_pages: expected max_pages * page_size < 2^31 rows, got 134217728 * 16");
}

TEST(AttentionArgs, BackwardErrorsNameTheArgument) {
  Fixture f;
  BackwardArgs b;
  b.fwd = f.fwd();
  b.dout = view({2, 4, 33, 32});
  b.dq = view({2, 4, 33, 64});
  b.dk = view({2, 2, 40, 64});
  b.dv = view({2, 2, 40, 32});
  EXPECT_EQ(error_of([&] { cuda_backward(b); }), "lse: the backward needs the forward's lse");
  b.fwd.lse = f.lse_mem;
  b.dk.shape[2] = 39;
  EXPECT_EQ(error_of([&] { cuda_backward(b); }), "dk: expected shape [2, 2, 40, 64], got [2, 2, 39, 64]");
  b.dk.shape[2] = 40;
  EXPECT_EQ(error_of([&] { cuda_backward(b); }),
            "workspace: the backward needs " + std::to_string(backward_workspace_bytes(b)) +
                " bytes (backward_workspace_bytes), got 0");
  // A misaligned float32 gradient accumulator (the kernels read a pointer with its low bit set as deterministic
  // mode's exact accumulators).
  b.workspace = g_mem, b.workspace_bytes = backward_workspace_bytes(b);
  b.fwd.bindings.buffer_grads["bias"] = reinterpret_cast<float*>(reinterpret_cast<char*>(g_mem) + 1);
  EXPECT_EQ(error_of([&] { cuda_backward(b); }), "buffer_grads['bias']: must be a 4-byte aligned float32 accumulator");
  b.fwd.bindings.buffer_grads.clear();
  b.workspace = nullptr, b.workspace_bytes = 0;
  // Head dims the backward cannot tile name the padding that works.
  b.fwd.q.shape[3] = b.fwd.k.shape[3] = b.dq.shape[3] = b.dk.shape[3] = 48;
  EXPECT_EQ(error_of([&] { cuda_backward(b); }),
            "head dims: the cuda backward takes multiples of 32 up to 128 or of 64 above, got D=48, Dv=32; zero-pad "
            "q and k to D=64 and v to Dv=32 (cuda_padded_head_dims; the result is unchanged)");
}

TEST(AttentionArgs, BackwardNeedsFullListsInBothDirections) {
  Fixture f;
  DeviceBlockMask m;
  const auto* mem = reinterpret_cast<const int32_t*>(g_mem);
  m.kv_num_blocks = m.kv_indices = m.q_num_blocks = m.q_indices = mem;
  m.q_len = 33, m.kv_len = 40, m.nq = 1, m.nkv = 1;
  m.full_kv_num_blocks = m.full_kv_indices = mem;
  BackwardArgs b;
  b.fwd = f.fwd();
  b.fwd.block_mask = &m;
  b.fwd.lse = f.lse_mem;
  b.dout = view({2, 4, 33, 32});
  b.dq = view({2, 4, 33, 64});
  b.dk = view({2, 2, 40, 64});
  b.dv = view({2, 2, 40, 32});
  EXPECT_EQ(error_of([&] { cuda_backward(b); }),
            "block_mask: the backward needs full_kv_num_blocks / full_kv_indices and full_q_num_blocks / full_q_indices "
            "together (got only the kv ones)");
  m.full_kv_num_blocks = m.full_kv_indices = nullptr;
  m.full_q_num_blocks = m.full_q_indices = mem;
  EXPECT_EQ(error_of([&] { cuda_backward(b); }),
            "block_mask: the backward needs full_kv_num_blocks / full_kv_indices and full_q_num_blocks / full_q_indices "
            "together (got only the q ones)");
}

TEST(AttentionArgs, BackwardWorkspaceHoldsDeltaAccumulatorClaimsAndInDeterministicModeTheSemaphores) {
  Fixture f;
  BackwardArgs b;
  b.fwd = f.fwd();  // q [2, 4, 33, 64]
  // delta 2*4*33 fp32 = 1056 bytes -> 1280 (256-aligned), then the fp32 dQ accumulator, then the dQ claim words: one
  // int per (b, h, 64-row query tile) plus one (FLEXATTN_SM90_BWD_DQ_CLAIM).
  // Then, 256-aligned, the sm90 backward's deferred launch order (FLEXATTN_SM90_BWD_CTA_ORDER): two ints per
  // main-kernel CTA, k [2, 2, 40, 64]: one 128-row kv tile x 2 kv heads x 2 kv batches.
  const size_t order = 2 * 1 * 2 * 2 * 4;
  const size_t accum_end = 1280 + size_t(2 * 4 * 33 * 64) * 4;
  const size_t claims_end = (accum_end + 255) / 256 * 256 + size_t(2 * 4 * 1 + 1) * 4;
  const size_t plain = (claims_end + 255) / 256 * 256 + order;
  EXPECT_EQ(backward_workspace_bytes(b), plain);
  // Without k's shape the size would leave out the launch order: an error, not a workspace too small for the call.
  BackwardArgs no_k = b;
  no_k.fwd.k.shape.clear();
  EXPECT_EQ(error_of([&] { backward_workspace_bytes(no_k); }),
            "fwd.k: backward_workspace_bytes needs k's shape [Bkv, Hkv, S, D] as well as q's, got 0 dims");
  // Deterministic: the same regions (the sm90 backward's ordered dQ reductions add into the accumulator), then as
  // many ints again: a semaphore per query tile plus the abandon word.
  b.deterministic = true;
  const size_t det = ((claims_end + 255) / 256 * 256 + size_t(2 * 4 * 1 + 1) * 4 + 255) / 256 * 256 + order;
  EXPECT_EQ(backward_workspace_bytes(b), det);
  // Learnable buffers: in deterministic mode their exact accumulators (264 bytes per element, each buffer's
  // 256-aligned) follow from the next 256-byte boundary; the default mode adds nothing for them.
  b.fwd.bindings.buffers["bias"].shape = {4, 65};
  b.fwd.bindings.buffers["slopes"].shape = {4};
  b.fwd.bindings.buffer_grads["bias"] = nullptr;
  b.fwd.bindings.buffer_grads["slopes"] = nullptr;
  EXPECT_EQ(backward_workspace_bytes(b), (det + 255) / 256 * 256 + 68864 + 1280);  // 4*65*264 = 68640; 4*264 = 1056
  b.deterministic = false;
  EXPECT_EQ(backward_workspace_bytes(b), plain);
}

}  // namespace
