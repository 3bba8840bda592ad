// Host side of the sm90 forward, no GPU or NVRTC needed: tensor-map arguments, the FLEXATTN_SM90
// opt-in and the eligibility rules, and the generated source.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <queue>
#include <random>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "common/params.h"
#include "flexattn/codegen.h"
#include "flexattn/error.h"
#include "flexattn/mods.h"
#include "jit/driver_api.h"
#include "runtime/kernel_set.h"
#include "runtime/sm90_tile_queue.h"
#include "runtime/tma_sm90.h"
#include "sm90/fwd_scheduler_sm90.cuh"
#include "sm90/tile_config_sm90.h"
#include "compile/sm90/sm90_host_util.h"

// The walker of the block-mask lists (host and device code): the persistent producer's count is checked against it.
#include "common/mask_iter.cuh"

using namespace flexattn;

using sm90_test::eligible_params;
using sm90_test::error_of;
using sm90_test::g_data;

namespace {

// The schedule model of the forward's tile queue: `count` tiles, tile t running dur(t) kv-tile times, handed out in
// order to `ctas` CTAs, each tile to the CTA whose claim comes first; a CTA running a tile from `start` for `d`
// claims its next one at claim(start, d) -- the greedy queue (the producer's take) at the tile's end. Returns the
// makespan.
template <class Dur, class Claim>
double queue_makespan(int count, Dur dur, Claim claim, int ctas = 132) {
  using Ev = std::pair<double, int>;  // (claim time, CTA)
  std::priority_queue<Ev, std::vector<Ev>, std::greater<Ev>> claims;
  std::vector<double> end(size_t(ctas), 0.0);
  for (int c = 0; c < ctas; ++c) claims.push({0.0, c});
  double last = 0.0;
  for (int t = 0; t < count; ++t) {
    const int c = claims.top().second;
    claims.pop();
    const double start = end[size_t(c)], d = dur(t);
    end[size_t(c)] = start + d;
    last = std::max(last, start + d);
    claims.push({claim(start, d), c});
  }
  return last;
}
template <class Dur>
double queue_makespan(int count, Dur dur, int ctas = 132) {
  return queue_makespan(count, dur, [](double start, double d) { return start + d; }, ctas);
}

}  // namespace

TEST(Sm90Host, MapArgsDescribeA4dViewWithSlabBoxes) {
  // q [B=2, H=3, L=100, D=128] with padded rows (stride 136) and heads (stride 100 * 136).
  const runtime::TmaMapArgs a =
      runtime::sm90_map_args("q", g_data, DType::BF16, 2, 3, 100, 128, 3 * 13600, 13600, 136, 64);
  EXPECT_EQ(a.data_type, 9);
  EXPECT_EQ(a.rank, 4u);
  EXPECT_EQ(a.address, g_data);
  const uint64_t dims[4] = {128, 100, 3, 2};
  const uint64_t strides[3] = {272, 27200, 81600};
  const uint32_t box[4] = {64, 64, 1, 1};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(a.dims[i], dims[i]) << i;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(a.strides[i], strides[i]) << i;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(a.box[i], box[i]) << i;
  EXPECT_EQ(a.swizzle, 3);   // 128B: a 64-element row of bf16
  EXPECT_EQ(a.oob_fill, 0);  // zeros past L / S
  EXPECT_EQ(runtime::sm90_map_args("v", g_data, DType::F16, 1, 1, 7, 64, 448, 448, 64, 128).data_type, 6);
}

TEST(Sm90Host, MapArgErrorsNameTheTensor) {
  EXPECT_EQ(error_of([] { runtime::sm90_map_args("k", g_data, DType::BF16, 1, 1, 8, 264, 2112, 2112, 264, 128); }),
            "k: the sm90 kernels take head dims up to 256, got 264");
  EXPECT_EQ(error_of([] { runtime::sm90_map_args("v", g_data, DType::BF16, 1, 1, 8, 64, 512, 512, 68, 128); }),
            "v: TMA needs strides that are multiples of 8 elements (16 bytes) below 2^39, got 68");
  EXPECT_EQ(error_of([] { runtime::sm90_map_args("q", g_data, DType::F32, 1, 1, 8, 64, 512, 512, 64, 64); }),
            "q: the sm90 kernels take bf16 or f16, got f32");
  EXPECT_EQ(error_of([] { runtime::sm90_map_args("out", g_data + 8, DType::BF16, 1, 1, 8, 64, 512, 512, 64, 64); }),
            "out: data must be 16-byte aligned");
}

TEST(Sm90Host, OnByDefaultAndSwitchedOffByTheEnvironment) {
  unsetenv("FLEXATTN_SM90");
  EXPECT_TRUE(runtime::sm90_forward_requested());
  setenv("FLEXATTN_SM90", "off", 1);
  EXPECT_FALSE(runtime::sm90_forward_requested());
  setenv("FLEXATTN_SM90", "maybe", 1);  // not a flag value: the default
  EXPECT_TRUE(runtime::sm90_forward_requested());
  setenv("FLEXATTN_SM90", "1", 1);
  EXPECT_TRUE(runtime::sm90_forward_requested());
  setenv("FLEXATTN_SM90", "0", 1);
  EXPECT_FALSE(runtime::sm90_forward_requested());
  unsetenv("FLEXATTN_SM90");
}

TEST(Sm90Host, SupportRulesAndReasons) {
  kern::AttnParams p = eligible_params();
  std::string why;
  EXPECT_TRUE(runtime::sm90_forward_supported("sm_90a", p, false, &why)) << why;
  EXPECT_FALSE(runtime::sm90_forward_supported("sm_80", p, false, &why));
  EXPECT_EQ(why, "the device is sm_80, the sm90 kernels need sm_90a");
  p.D = p.Dv = 96;
  setenv("FLEXATTN_SM90_PAD_HEAD_DIM", "0", 1);  // off: the sm80 family
  EXPECT_FALSE(runtime::sm90_forward_supported("sm_90a", p, false, &why));
  EXPECT_EQ(why, "head dims D=96, Dv=96 (the sm90 forward takes 64, 128, 192, 256; FLEXATTN_SM90_PAD_HEAD_DIM=0 turned "
                 "off the multiples of 16 between them)");
  unsetenv("FLEXATTN_SM90_PAD_HEAD_DIM");  // default: on the D = 128 kernel (sm90_padded_head_dim)
  EXPECT_TRUE(runtime::sm90_forward_supported("sm_90a", p, false, &why)) << why;
  p.D = 100;  // not a multiple of 16 (the API refuses it before)
  EXPECT_FALSE(runtime::sm90_forward_supported("sm_90a", p, false, &why));
  EXPECT_EQ(why, "head dims D=100, Dv=96 (the sm90 forward takes 64, 128, 192, 256, and multiples of 16 between 64 and "
                 "256 on the next of them)");
  p.D = 48;  // below 64: the sm80 family
  EXPECT_FALSE(runtime::sm90_forward_supported("sm_90a", p, false, &why));
  p.D = 64, p.Dv = 264;
  EXPECT_FALSE(runtime::sm90_forward_supported("sm_90a", p, false, &why));
  p = eligible_params();
  static const int counts[1] = {1};
  p.kv_num_blocks = counts;  // a block mask with 64-wide kv blocks: the d128 kv tile is 128
  p.q_block = 128, p.kv_block = 64;
  EXPECT_FALSE(runtime::sm90_forward_supported("sm_90a", p, false, &why));
  EXPECT_EQ(why, "block mask BLOCK_SIZE (128, 64) is not a multiple of (128, 128)");
  EXPECT_TRUE(runtime::sm90_forward_supported("sm_90a", p, true, &why)) << why;  // narrow: 128 x 64
  p.D = p.Dv = 256;  // the d256 kv tile is 64
  EXPECT_TRUE(runtime::sm90_forward_supported("sm_90a", p, false, &why)) << why;
  p = eligible_params();
  p.scale = 0.f;  // the softmax folds scale into exp2 with an order-preserving factor
  EXPECT_FALSE(runtime::sm90_forward_supported("sm_90a", p, false, &why));
  EXPECT_EQ(why, "scale 0.000000 (the sm90 forward needs scale > 0)");
  p.scale = -0.125f;
  EXPECT_FALSE(runtime::sm90_forward_supported("sm_90a", p, false, &why));
}

// Head dims between the compiled ones run on the next one up (their TMA boxes read zeros past d, the O map drops the
// padded columns): 80..240 in steps of 16; the compiled dims map to themselves; d < 64, d > 256, d % 16 != 0: none (0).
TEST(Sm90Host, PaddedHeadDims) {
  for (int d : {64, 128, 192, 256}) EXPECT_EQ(kern::sm90_padded_head_dim(d), d);
  EXPECT_EQ(kern::sm90_padded_head_dim(80), 128);
  EXPECT_EQ(kern::sm90_padded_head_dim(96), 128);
  EXPECT_EQ(kern::sm90_padded_head_dim(112), 128);
  EXPECT_EQ(kern::sm90_padded_head_dim(144), 192);
  EXPECT_EQ(kern::sm90_padded_head_dim(160), 192);
  EXPECT_EQ(kern::sm90_padded_head_dim(208), 256);
  EXPECT_EQ(kern::sm90_padded_head_dim(240), 256);
  for (int d : {0, 8, 32, 48, 72, 100, 136, 257, 272, 512}) EXPECT_EQ(kern::sm90_padded_head_dim(d), 0) << d;
  // The call's key is the padded one, so 80 and 96 share the D = 128 kernel; FLEXATTN_SM90_PAD_HEAD_DIM=0: none.
  setenv("FLEXATTN_SM90_PAD_HEAD_DIM", "0", 1);
  EXPECT_EQ(runtime::sm90_fwd_head_dim(96), 0);
  EXPECT_EQ(runtime::sm90_fwd_head_dim(128), 128);
  unsetenv("FLEXATTN_SM90_PAD_HEAD_DIM");
  EXPECT_EQ(runtime::sm90_fwd_head_dim(96), 128);
  const runtime::KernelSetKey k96 = runtime::sm90_fwd_call_key(DType::BF16, 96, 80, "sm_90a", true);
  EXPECT_EQ(k96.d, 128);
  EXPECT_EQ(k96.dv, 128);
  EXPECT_FALSE(k96.sm90_fwd_tall);
  // A map keeps the call's head dim: 96 columns, 64-column boxes (the second box reads zeros past column 96).
  const runtime::TmaMapArgs a = runtime::sm90_map_args("q", g_data, DType::BF16, 1, 2, 10, 96, 1920, 960, 96, 64);
  EXPECT_EQ(a.dims[0], 96u);
  EXPECT_EQ(a.box[0], 64u);
}

TEST(Sm90Host, SourceNamesTheHopperEntry) {
  setenv("FLEXATTN_SM90_PERSISTENT", "0", 1);  // one CTA per tile; the persistent kernel (the default) below
  Variant v;
  v.mask_mod = mods::causal();
  const codegen::GeneratedVariant gen = codegen::emit_cuda_variant(v, false);
  runtime::KernelSetKey key{DType::BF16, 128, 64, "sm_90a", false, runtime::KernelFamily::sm90};
  const std::string src = runtime::kernel_source_sm90(gen, key);
  EXPECT_NE(src.find("#include \"sm90/attn_fwd_sm90.cuh\""), std::string::npos) << src;
  EXPECT_NE(src.find("__launch_bounds__(kSm90Threads, 1)"), std::string::npos) << src;
  EXPECT_NE(src.find("flexattn_fwd(const __grid_constant__ AttnParams p) { attn_fwd_sm90<FlexVariant, bf16, 128, 64, false>(p); }"),
            std::string::npos)
      << src;
  // The persistent kernel (the default since session 4): one more template argument.
  unsetenv("FLEXATTN_SM90_PERSISTENT");
  EXPECT_NE(runtime::kernel_source_sm90(gen, key)
                .find("flexattn_fwd(const __grid_constant__ AttnParams p) { attn_fwd_sm90<FlexVariant, bf16, 128, 64, false, true>(p); }"),
            std::string::npos);
  setenv("FLEXATTN_SM90_PERSISTENT", "0", 1);
  EXPECT_EQ(runtime::kernel_source_sm90(gen, key), src);
  unsetenv("FLEXATTN_SM90_PERSISTENT");
  key.backward = true;  // the backward set has its own generator (test_sm90_bwd_host.cc); v2 + bulk + v3 at D=128
  EXPECT_NE(runtime::kernel_source_sm90(gen, key).find("attn_bwd_sm90<FlexVariant, bf16, 128, 64, true, true, true>(p)"),
            std::string::npos);
  key.backward = false;
  key.d = 96;
  EXPECT_EQ(error_of([&] { runtime::kernel_source_sm90(gen, key); }),
            "head dims: the sm90 forward takes 64, 128, 192 or 256, got D=96, Dv=64");
}

// Since session 5 every variant takes the wide tile by default (H200 S=8192 relbias 321 -> 350 TFLOP/s);
// FLEXATTN_SM90_NARROW=1 gives buffer-reading mods the narrow one again.
TEST(Sm90Host, BufferReadingModsGetTheNarrowTileOnlyWhenAsked) {
  Variant plain, gather;
  plain.score_mod = mods::softcap(30);
  gather.score_mod = mods::lookup_score("relbias").expr;
  const codegen::GeneratedVariant a = codegen::emit_cuda_variant(plain, false);
  const codegen::GeneratedVariant b = codegen::emit_cuda_variant(gather, false);
  runtime::KernelSetKey key{DType::F16, 128, 128, "sm_90a", false, runtime::KernelFamily::sm90};
  EXPECT_FALSE(runtime::sm90_narrow_tile(a.layout));
  EXPECT_FALSE(runtime::sm90_narrow_tile(b.layout));
  EXPECT_NE(runtime::kernel_source_sm90(b, key).find("attn_fwd_sm90<FlexVariant, fp16, 128, 128, false, true>(p)"),
            std::string::npos);
  setenv("FLEXATTN_SM90_NARROW", "1", 1);
  EXPECT_FALSE(runtime::sm90_narrow_tile(a.layout));
  EXPECT_TRUE(runtime::sm90_narrow_tile(b.layout));
  EXPECT_NE(runtime::kernel_source_sm90(b, key).find("attn_fwd_sm90<FlexVariant, fp16, 128, 128, true, true>(p)"),
            std::string::npos);
  unsetenv("FLEXATTN_SM90_NARROW");
  EXPECT_EQ(kern::sm90_fwd_tile(128, 128, true).block_n, 64);
  EXPECT_EQ(kern::sm90_fwd_tile(128, 128, false).block_n, 128);
}

TEST(Sm90Host, DeclineExplainsItselfUnderJitDebug) {
  setenv("FLEXATTN_JIT_DEBUG", "1", 1);
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(runtime::sm90_decline("head dims D=96, Dv=96"));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "[flexattn sm90] using the sm80 kernels: head dims D=96, Dv=96\n");
  unsetenv("FLEXATTN_JIT_DEBUG");
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(runtime::sm90_decline("quiet"));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(Sm90Host, EncodingWithoutADriverNamesTheTensor) {
  std::string err;
  if (jit::try_driver(&err) != nullptr) GTEST_SKIP() << "a CUDA driver is present";
  kern::AttnParams p{};
  p.q = p.k = p.v = g_data;
  p.out = g_data;
  p.B = p.Hq = p.Hkv = p.Bkv = 1;
  p.L = p.S = 8;
  p.D = p.Dv = 64;
  p.q_sl = p.k_sl = p.v_sl = p.out_sl = 64;
  p.q_sh = p.k_sh = p.v_sh = p.out_sh = p.q_sb = p.k_sb = p.v_sb = p.out_sb = 512;
  const std::string msg = error_of([&] { runtime::encode_sm90_forward_maps(&p, DType::BF16, false, p.D, p.Dv); });
  EXPECT_EQ(msg.rfind("q: the sm90 kernels need the CUDA driver: ", 0), 0u) << msg;
}

TEST(Sm90Host, ParamsKeepTheirLayout) {
  // Appending the tensor maps must not move a field the sm80 kernels read, and must fit the 4 KiB limit.
  EXPECT_EQ(offsetof(kern::AttnParams, mod), 432u);
  EXPECT_EQ(offsetof(kern::AttnParams, q_map) % 128, 0u);
  EXPECT_LE(sizeof(kern::AttnParams), 4096u);
}

// The persistent schedule: every (query tile, head, batch) exactly once, heads grouped so their K/V fit
// in L2, and inside a group the query tiles longest first (descending), for odd shapes too.
TEST(Sm90Host, TileOrderIsAPermutationLongestFirstPerHeadGroup) {
  struct Shape {
    int B, Hq, L, S;
  };
  for (const Shape& sh : {Shape{1, 1, 1, 1}, Shape{2, 16, 8192, 8192}, Shape{3, 5, 1000, 100000}, Shape{4, 16, 2048, 2048},
                          Shape{1, 7, 129, 12}}) {
    kern::AttnParams p{};
    p.B = sh.B, p.Hq = sh.Hq, p.L = sh.L, p.S = sh.S;
    const auto order = kern::sm90::fwd_tile_order<128, 128, 128>(p);
    const int nq = (sh.L + 127) / 128;
    ASSERT_EQ(order.count, nq * sh.Hq * sh.B);
    const long long kv_bytes = 1ll * sh.S * 256 * 2;
    EXPECT_GE(order.group, 1);
    EXPECT_TRUE(order.group == 1 || order.group * kv_bytes <= kern::kL2GroupBudgetBytes) << order.group;
    std::vector<int> seen(order.count, 0);
    int last_group = -1, last_q = 1 << 30;
    for (int t = 0; t < order.count; ++t) {
      const kern::sm90::FwdTile tile = order.at<128>(t);
      ASSERT_TRUE(tile.q0 % 128 == 0 && tile.q0 < sh.L && tile.h >= 0 && tile.h < sh.Hq && tile.b >= 0 && tile.b < sh.B);
      const int hb = tile.b * sh.Hq + tile.h;
      seen[(tile.q0 / 128) * sh.Hq * sh.B + hb]++;
      const int group = hb / order.group;
      if (group != last_group) last_group = group, last_q = 1 << 30;
      EXPECT_LE(tile.q0, last_q) << "t=" << t;  // query tiles never go back up inside a group
      last_q = tile.q0;
    }
    for (int n : seen) ASSERT_EQ(n, 1);
  }
  EXPECT_EQ(kern::sm90_fwd_launch(128, 128, false, 2, 16, 8192, 132, true).grid_x, 132u);
  EXPECT_EQ(kern::sm90_fwd_launch(128, 128, false, 1, 1, 129, 132, true).grid_x, 2u);  // fewer tiles than SMs
  EXPECT_EQ(kern::sm90_fwd_launch(128, 128, false, 2, 16, 8192, 132, false).grid_x, 64u * 32u);  // one per tile
}

// The persistent kernel's layout: two Q buffers wherever d <= 128 (each 1024-aligned, after them the
// ring as before), one above; the default layout is the one the measured kernel used.
TEST(Sm90Host, PersistentLayoutHasTwoQBuffersUpToD128) {
  struct Dims {
    int d, dv;
    bool narrow;
    int q_bufs;
  };
  for (const Dims& x : {Dims{64, 64, false, 2}, Dims{64, 64, true, 2}, Dims{128, 128, false, 2}, Dims{128, 128, true, 2},
                        Dims{64, 128, false, 2}, Dims{128, 64, false, 2}, Dims{192, 192, false, 1},
                        Dims{256, 256, false, 1}, Dims{64, 256, false, 1}, Dims{256, 64, false, 1}}) {
    const std::string what = "D=" + std::to_string(x.d) + " Dv=" + std::to_string(x.dv) + (x.narrow ? " narrow" : "");
    const kern::Sm90FwdSmem def = kern::sm90_fwd_smem_layout(x.d, x.dv, x.narrow);
    const kern::Sm90FwdSmem per = kern::sm90_fwd_smem_layout(x.d, x.dv, x.narrow, true);
    const kern::Sm90FwdTile t = kern::sm90_fwd_tile(x.d, x.dv, x.narrow);
    EXPECT_EQ(def.q_bufs, 1) << what;
    EXPECT_EQ(per.q_bufs, x.q_bufs) << what;
    EXPECT_EQ(kern::sm90_fwd_q_buffers(x.d, x.dv, x.narrow), x.q_bufs) << what;
    // The default: Q, ring, 2 + 4 * stages barriers, 2 info ints per stage (as before the persistent kernel).
    EXPECT_EQ(def.k, 2 * def.q_half) << what;
    // (Then, 16-aligned, the distance-bias tables of the kernels that use them: none here.)
    EXPECT_EQ(def.rel, (def.bars + 8 * (2 + 4 * t.stages) + 8 * t.stages + 15) / 16 * 16) << what;
    EXPECT_EQ(def.total, def.bars + 8 * (2 + 4 * t.stages) + 8 * t.stages) << what;
    EXPECT_EQ(per.k, 2 * x.q_bufs * per.q_half) << what;
    EXPECT_EQ(per.k % 1024, 0) << what;
    EXPECT_EQ(per.v - per.k, def.v - def.k) << what;
    EXPECT_EQ(per.counts, per.info + 8 * t.stages) << what;
    EXPECT_EQ(per.total, per.counts + 8 * x.q_bufs) << what;
    EXPECT_LE(kern::sm90_fwd_smem(x.d, x.dv, x.narrow, true), kern::kSm90SmemLimit) << what;
    EXPECT_EQ(kern::sm90_fwd_launch(x.d, x.dv, x.narrow, 2, 16, 8192, 132, true).smem,
              unsigned(kern::sm90_fwd_smem(x.d, x.dv, x.narrow, true)))
        << what;
    EXPECT_EQ(kern::sm90_fwd_launch(x.d, x.dv, x.narrow, 2, 16, 8192, 132, false).smem,
              unsigned(kern::sm90_fwd_smem(x.d, x.dv, x.narrow)))
        << what;
  }
  EXPECT_EQ(kern::sm90_fwd_smem(128, 128, false, true), 192 * 1024 + 8 * (4 + 8) + 8 * 2 + 8 * 2 + 1024);
  // With the distance tables: 8 warps' tables of 144 floats after the counts (16-aligned).
  EXPECT_EQ(kern::sm90_fwd_smem(128, 128, false, true, false, true), 192 * 1024 + 8 * (4 + 8) + 8 * 2 + 8 * 2 + 8 * 144 * 4 + 1024);
}

// The persistent producer publishes the kv-tile count of a work tile before it walks the lists; the
// consumers trust it, so it must equal the walk for every list, including bad indices (negative, past
// S), counts past the row, blocks larger than the tile and a last block cut by S.
TEST(Sm90Host, PersistentKvCountMatchesTheWalk) {
  unsigned seed = 12345u;
  auto rnd = [&](int n) {
    seed = seed * 1664525u + 1013904223u;
    return int((seed >> 8) % unsigned(n));
  };
  kern::TileWalker w;
  for (int trial = 0; trial < 4000; ++trial) {
    const int tile = trial % 2 ? 64 : 128;
    const int block = tile * (1 + rnd(3));
    const int S = 1 + rnd(2000);
    const int ncols = 1 + rnd(24);
    std::vector<int> idx0(ncols), idx1(ncols);
    for (int& i : idx0) i = rnd(8) == 0 ? -1 - rnd(3) : rnd(S / block + 3);
    for (int& i : idx1) i = rnd(8) == 0 ? -1 - rnd(3) : rnd(S / block + 3);
    const int num0 = rnd(ncols + 3) - 1, num1 = rnd(ncols + 3) - 1;  // -1 and > ncols are clamped
    const bool with_full = rnd(2) == 0, row_ok = rnd(10) != 0;
    w.init(&num0, idx0.data(), with_full ? &num1 : nullptr, with_full ? idx1.data() : nullptr, 0, row_ok, ncols, block,
           tile, S);
    const int counted = tile == 64 ? kern::sm90::fwd_count_kv_tiles<64>(w.idx0, w.cnt0, w.idx1, w.cnt1, w.block, w.len)
                                   : kern::sm90::fwd_count_kv_tiles<128>(w.idx0, w.cnt0, w.idx1, w.cnt1, w.block, w.len);
    int walked = 0;
    while (w.next()) ++walked;
    ASSERT_EQ(counted, walked) << "trial " << trial << " S=" << S << " block=" << block << " tile=" << tile;
  }
  // No block mask: the implicit list {0} with one block covering every tile.
  for (int S : {1, 63, 64, 65, 128, 129, 8192, 8193}) {
    w.init(nullptr, nullptr, nullptr, nullptr, 0, true, 1, 1, 128, S);
    int walked = 0;
    const int counted = kern::sm90::fwd_count_kv_tiles<128>(w.idx0, w.cnt0, w.idx1, w.cnt1, w.block, w.len);
    while (w.next()) ++walked;
    EXPECT_EQ(counted, walked) << S;
    EXPECT_EQ(counted, (S + 127) / 128) << S;
  }
}

// The persistent kernel's tile queue (fwd_scheduler_sm90.cuh, "Queue word"), with the device's
// atomicAdd / atomicExch replaced by plain host operations: CTAs step in a random interleaving, each
// starting at blockIdx.x and taking until its take fails. Every tile must be handed out exactly once,
// the launch must make exactly `count` atomic adds, and the word must be back at 0 for the next launch
// on the same word (two launches run back to back here, as on one stream).
TEST(Sm90Host, TileQueueHandsOutEveryTileOnceAndLeavesTheWordAtZero) {
  unsigned seed = 777u;
  auto rnd = [&](int n) {
    seed = seed * 1664525u + 1013904223u;
    return int((seed >> 8) % unsigned(n));
  };
  struct Shape {
    int count, grid;
  };
  for (const Shape& sh : {Shape{1, 1}, Shape{2, 2}, Shape{5, 3}, Shape{132, 132}, Shape{133, 132}, Shape{1024, 132},
                          Shape{4096, 132}, Shape{1000, 1}, Shape{7, 9}}) {
    for (bool queued : {true, false}) {
      unsigned word = 0;
      for (int launch = 0; launch < 2; ++launch) {
        long long adds = 0, resets = 0;
        auto add = [&](unsigned* q) {
          ++adds;
          return (*q)++;
        };
        auto store = [&](unsigned* q) {
          ++resets;
          *q = 0;
        };
        std::vector<int> t(sh.grid), seen(sh.count, 0);
        for (int c = 0; c < sh.grid; ++c) t[c] = c;  // the static first tile: blockIdx.x
        std::vector<int> active;
        for (int c = 0; c < sh.grid; ++c) active.push_back(c);
        while (!active.empty()) {
          const int k = rnd(int(active.size())), c = active[k];
          if (t[c] >= sh.count) {  // the end marker: this CTA is done
            active.erase(active.begin() + k);
            continue;
          }
          ++seen[t[c]];
          t[c] = kern::sm90::fwd_queue_next_with(queued ? &word : nullptr, t[c], sh.count, sh.grid, add, store);
        }
        const std::string what = "count=" + std::to_string(sh.count) + " grid=" + std::to_string(sh.grid) +
                                 (queued ? " queue" : " static") + " launch " + std::to_string(launch);
        for (int i = 0; i < sh.count; ++i) ASSERT_EQ(seen[i], 1) << what << " tile " << i;
        EXPECT_EQ(word, 0u) << what;
        if (queued) {
          // One take after every tile run (count in all, the failing ones included), and exactly one
          // of them stores the 0.
          EXPECT_EQ(adds, sh.count) << what;
          EXPECT_EQ(resets, 1) << what;
        } else {
          EXPECT_EQ(adds + resets, 0) << what;
        }
      }
    }
  }
}

// The same with real concurrency: host threads as CTAs on one std::atomic word (fetch_add is the
// device's relaxed atomicAdd), several launches back to back.
TEST(Sm90Host, TileQueueUnderConcurrentTakes) {
  constexpr int kGrid = 8, kCount = 20000;
  unsigned word = 0;
  for (int launch = 0; launch < 3; ++launch) {
    std::vector<std::atomic<int>> seen(kCount);
    for (auto& s : seen) s = 0;
    std::vector<std::thread> ctas;
    for (int c = 0; c < kGrid; ++c)
      ctas.emplace_back([&, c] {
        auto add = [](unsigned* q) { return std::atomic_ref<unsigned>(*q).fetch_add(1u); };
        auto store = [](unsigned* q) { std::atomic_ref<unsigned>(*q).store(0u); };
        for (int t = c; t < kCount;) {
          seen[t].fetch_add(1);
          t = kern::sm90::fwd_queue_next_with(&word, t, kCount, kGrid, add, store);
        }
      });
    for (auto& th : ctas) th.join();
    for (int i = 0; i < kCount; ++i) ASSERT_EQ(seen[i].load(), 1) << "launch " << launch << " tile " << i;
    EXPECT_EQ(std::atomic_ref<unsigned>(word).load(), 0u) << "launch " << launch;
  }
}

// Why the queue: the makespan of the tiles (duration = kv tiles + half a tile of epilogue) on 132 CTAs,
// longest first, B=4 H=16 S=2048 causal. The static stride gives CTA k tiles k, k + 132, ...; the queue
// gives each tile to the CTA that frees up first (what the producer's take does, ignoring its one tile
// of lookahead). Static is 28 % over the queue here (91 vs 71 kv-tile times, bound 69.8), matching the
// 6-15 % loss of the static persistent kernel against one CTA per tile on causal (bench/RESULTS.md).
TEST(Sm90Host, TileQueueBalancesCausalBetterThanTheStaticStride) {
  kern::AttnParams p{};
  p.B = 4, p.Hq = 16, p.L = p.S = 2048;
  const auto order = kern::sm90::fwd_tile_order<128, 128, 128>(p);
  constexpr int kCtas = 132;
  std::vector<double> dur(order.count);
  for (int t = 0; t < order.count; ++t) dur[t] = order.at<128>(t).q0 / 128 + 1 + 0.5;  // causal: qt + 1 kv tiles
  std::vector<double> load(kCtas, 0.0);
  for (int t = 0; t < order.count; ++t) load[t % kCtas] += dur[t];
  const double stride = *std::max_element(load.begin(), load.end());
  const double queue = queue_makespan(order.count, [&](int t) { return dur[size_t(t)]; }, kCtas);
  const double total = std::accumulate(dur.begin(), dur.end(), 0.0);
  EXPECT_DOUBLE_EQ(stride, 91.0);
  EXPECT_DOUBLE_EQ(queue, 71.0);
  EXPECT_LT(queue, 1.02 * total / kCtas);
}

// FLEXATTN_SM90_EARLY_CLAIM = k (fwd_producer_sm90.cuh): a CTA claims its next tile k kv-tile times before its
// current tile ends (at its start if the tile is shorter), and tiles go out in claim order. Claims then come in the
// order of the tiles' ends, as the greedy queue's do, except behind tiles shorter than k, so the makespan barely
// moves; a claim at the tile's start (one tile ahead) orders by starts instead and loses. Causal, B=2 H=16 S=8192, the
// order of SmallerHeadGroupRunsFirst, kv-tile times: greedy 512.5; k = 1, 2: 512.5; k = 4: 514; k = 8: 517; one tile
// ahead: 531.5.
TEST(Sm90Host, EarlyClaimKeepsTheGreedyMakespan) {
  kern::AttnParams p{};
  p.B = 2, p.Hq = 16, p.L = p.S = 8192;
  const auto order = kern::sm90::fwd_tile_order<128, 128, 128>(p);
  auto dur = [&](int t) { return order.at<128>(t).q0 / 128 + 1 + 0.5; };
  auto makespan = [&](auto claim) { return queue_makespan(order.count, dur, claim); };
  const double greedy = queue_makespan(order.count, dur);
  EXPECT_DOUBLE_EQ(greedy, 512.5);
  for (double k : {1.0, 2.0, 4.0})
    EXPECT_LE(makespan([k](double s, double d) { return std::max(s, s + d - k); }), greedy * 1.005) << "k " << k;
  EXPECT_GT(makespan([](double s, double) { return s; }), greedy * 1.02);  // one tile ahead
}

// The smaller head group first (FwdTileOrder::span): B=2 H=16 S=8192 D=128 has groups of 6, 6, 6, 6, 6 and 2
// heads. Run last, the 2-head group's 64-kv-tile tiles started when every CTA was busy and ended the launch
// alone: causal makespan 534.5 kv-tile times; first, 512.5 (bound 512).
TEST(Sm90Host, SmallerHeadGroupRunsFirst) {
  kern::AttnParams p{};
  p.B = 2, p.Hq = 16, p.L = p.S = 8192;
  const auto order = kern::sm90::fwd_tile_order<128, 128, 128>(p);
  ASSERT_EQ(order.group, 6);
  EXPECT_EQ(order.at<128>(0).q0, 63 * 128);
  EXPECT_EQ(order.at<128>(0).b * 16 + order.at<128>(0).h, 30);  // heads-and-batches 30, 31 first
  EXPECT_EQ(order.at<128>(1).b * 16 + order.at<128>(1).h, 31);
  EXPECT_EQ(order.at<128>(128).b * 16 + order.at<128>(128).h, 0);  // then the groups of 6 from the start
  EXPECT_EQ((order.at<128, false>(0).b * 16 + order.at<128, false>(0).h), 0);  // FLEXATTN_SM90_SMALL_GROUP_FIRST=0
  // Every tile exactly once in both orders; the causal makespan of each (tile = q tiles + half a tile).
  auto makespan = [&](auto at) {
    std::vector<int> seen(size_t(order.count), 0);
    for (int t = 0; t < order.count; ++t) {
      const auto tile = at(t);
      EXPECT_TRUE(tile.b >= 0 && tile.b < 2 && tile.h >= 0 && tile.h < 16 && tile.q0 >= 0 && tile.q0 < 8192) << t;
      ++seen[size_t((tile.b * 16 + tile.h) * 64 + tile.q0 / 128)];
    }
    for (int i = 0; i < order.count; ++i) EXPECT_EQ(seen[size_t(i)], 1) << "tile " << i;
    return queue_makespan(order.count, [&](int t) { return at(t).q0 / 128 + 1 + 0.5; });
  };
  EXPECT_DOUBLE_EQ(makespan([&](int t) { return order.at<128, true>(t); }), 512.5);
  EXPECT_DOUBLE_EQ(makespan([&](int t) { return order.at<128, false>(t); }), 534.5);
}

// FLEXATTN_SM90_ROW_ORDER: queue position t runs natural index fwd_ordered_index(t). Over a launch the
// positions must still cover every work tile exactly once, each head's k-th query tile must be row
// q_order[k] of its mask (b, h), and anything the order cannot apply to keeps the natural order.
TEST(Sm90Host, RowOrderPermutesTheWorkTilesPerHead) {
  for (const auto& [mask_B, mask_H] : {std::pair{1, 1}, std::pair{2, 1}, std::pair{2, 3}}) {
    kern::AttnParams p{};
    p.B = 2, p.Hq = 3, p.L = p.S = 1000;  // 8 query tiles; D=128 K/V fit: one head group of 6
    p.q_block = 128, p.nq = 8, p.mask_B = mask_B, p.mask_H = mask_H;
    std::vector<int> q_order(size_t(mask_B * mask_H * 8));
    std::mt19937 rng(7 + mask_B * 10 + mask_H);
    for (int s = 0; s < mask_B * mask_H; ++s) {
      std::iota(q_order.begin() + s * 8, q_order.begin() + s * 8 + 8, 0);
      std::shuffle(q_order.begin() + s * 8, q_order.begin() + s * 8 + 8, rng);
    }
    p.q_order = q_order.data();
    const auto order = kern::sm90::fwd_tile_order<128, 128, 128>(p);
    ASSERT_EQ(order.nq, 8);
    std::vector<int> seen(size_t(order.count), 0), taken(size_t(p.B * p.Hq), 0);
    for (int t = 0; t < order.count; ++t) {
      const int to = kern::sm90::fwd_ordered_index<128>(order, p, t);
      ASSERT_GE(to, 0);
      ASSERT_LT(to, order.count);
      ++seen[size_t(to)];
      const auto tile = order.at<128>(to);
      const int k = taken[size_t(tile.b * p.Hq + tile.h)]++;  // the head's k-th tile in queue order
      EXPECT_EQ(tile.q0 / 128, q_order[size_t(((tile.b % mask_B) * mask_H + tile.h % mask_H) * 8 + k)])
          << "mask " << mask_B << "x" << mask_H << " t=" << t;
    }
    for (int i = 0; i < order.count; ++i) ASSERT_EQ(seen[size_t(i)], 1) << "natural index " << i;
    // Not applicable: another mask block, a mask with other rows, a bad entry -> the natural tile.
    q_order[0] = 99;
    EXPECT_EQ(kern::sm90::fwd_ordered_index<128>(order, p, 0), 0);
    p.q_block = 256;
    EXPECT_EQ(kern::sm90::fwd_ordered_index<128>(order, p, 5), 5);
    p.q_block = 128, p.nq = 4;
    EXPECT_EQ(kern::sm90::fwd_ordered_index<128>(order, p, 5), 5);
  }
}

// FLEXATTN_SM90_ROW_ORDER's modes (auto by default), and a clear error naming the variable for anything else.
TEST(Sm90Host, RowOrderModeIsAutoByDefaultAndNamesTheVariableOnABadValue) {
  unsetenv("FLEXATTN_SM90_ROW_ORDER");
  EXPECT_EQ(runtime::sm90_row_order_mode(), runtime::Sm90RowOrder::automatic);
  setenv("FLEXATTN_SM90_ROW_ORDER", "AUTO", 1);
  EXPECT_EQ(runtime::sm90_row_order_mode(), runtime::Sm90RowOrder::automatic);
  setenv("FLEXATTN_SM90_ROW_ORDER", "0", 1);
  EXPECT_EQ(runtime::sm90_row_order_mode(), runtime::Sm90RowOrder::off);
  setenv("FLEXATTN_SM90_ROW_ORDER", "1", 1);
  EXPECT_EQ(runtime::sm90_row_order_mode(), runtime::Sm90RowOrder::always);
  setenv("FLEXATTN_SM90_ROW_ORDER", "sorted", 1);
  EXPECT_EQ(error_of([] { runtime::sm90_row_order_mode(); }),
            "FLEXATTN_SM90_ROW_ORDER: expected 0, 1 or auto, got 'sorted'");
  unsetenv("FLEXATTN_SM90_ROW_ORDER");
}

// The host's q_order_on: worth it only where a row holds more kv blocks than the row after it (the natural order
// runs the later row first), in any (b, h).
TEST(Sm90Host, RowOrderIsWorthItOnlyWhereTheNaturalOrderIsNotLongestFirst) {
  const std::vector<int32_t> causal = {1, 2, 3, 4}, equal = {4, 4, 4, 4}, document = {1, 2, 3, 1};
  EXPECT_FALSE(runtime::row_order_worth_it(causal.data(), nullptr, 1, 4));
  EXPECT_FALSE(runtime::row_order_worth_it(equal.data(), nullptr, 1, 4));
  EXPECT_TRUE(runtime::row_order_worth_it(document.data(), nullptr, 1, 4));
  // Partial + full: {0+1, 2+0, 1+2, 3+1} is 1, 2, 3, 4 (natural); partial alone would not be.
  const std::vector<int32_t> partial = {0, 2, 1, 3}, full = {1, 0, 2, 1};
  EXPECT_FALSE(runtime::row_order_worth_it(partial.data(), full.data(), 1, 4));
  EXPECT_TRUE(runtime::row_order_worth_it(partial.data(), nullptr, 1, 4));
  // Two (b, h): the second one decides; rows do not run across them.
  const std::vector<int32_t> two = {1, 2, 3, 4, 5, 6, 7, 1}, seam = {3, 4, 1, 2};
  EXPECT_TRUE(runtime::row_order_worth_it(two.data(), nullptr, 2, 4));
  EXPECT_FALSE(runtime::row_order_worth_it(seam.data(), nullptr, 2, 2));
}

// FLEXATTN_SM90_ROW_ORDER=auto: q_order_on (a device int the Python package computes with the order) says whether
// the natural order is already longest first; 0 keeps the natural tiles without a lookup, nonzero follows q_order,
// null follows it always.
TEST(Sm90Host, RowOrderFollowsTheOrderOnlyWhereItsFlagSays) {
  kern::AttnParams p{};
  p.B = 1, p.Hq = 2, p.L = p.S = 1000;
  p.q_block = 128, p.nq = 8, p.mask_B = p.mask_H = 1;
  std::vector<int> q_order = {3, 1, 4, 7, 0, 2, 6, 5};
  p.q_order = q_order.data();
  int on = 0;
  p.q_order_on = &on;
  auto first_row = [&] {
    const auto order = kern::sm90::fwd_tile_order<128, 128, 128>(p);
    return order.at<128>(kern::sm90::fwd_ordered_index<128>(order, p, 0)).q0 / 128;
  };
  EXPECT_EQ(first_row(), 7);  // the natural order: last row first
  on = 1;
  EXPECT_EQ(first_row(), 3);
  p.q_order_on = nullptr;
  EXPECT_EQ(first_row(), 3);
  p.q_order = nullptr;
  EXPECT_EQ(first_row(), 7);
}

// Why the row order: bench/run.py's document mask (8 documents of random length, causal inside; B=2 H=16
// S=8192) in the queue's schedule model (tile = kv tiles + half a tile, 132 CTAs, greedy). The natural
// order (last query tiles first) suits causal masks, not documents whose longest rows sit mid-sequence.
TEST(Sm90Host, RowOrderShortensTheDocumentMaskSchedule) {
  const std::vector<int> docs = {332, 1790, 1034, 290, 2764, 708, 375, 899};  // bench_cases.doc_lengths(8192)
  std::vector<int> doc_of;
  for (size_t d = 0; d < docs.size(); ++d) doc_of.insert(doc_of.end(), size_t(docs[d]), int(d));
  ASSERT_EQ(doc_of.size(), 8192u);
  std::vector<int> kv_tiles(64, 0), q_order(64);
  for (int qt = 0; qt < 64; ++qt)
    for (int kt = 0; kt <= qt; ++kt)  // causal inside a document: some (q, kv) pair shares a document
      if (doc_of[size_t(kt * 128)] <= doc_of[size_t(qt * 128 + 127)] && doc_of[size_t(kt * 128 + 127)] >= doc_of[size_t(qt * 128)])
        ++kv_tiles[size_t(qt)];
  for (int k = 0; k < 64; ++k) q_order[size_t(k)] = 63 - k;  // ties last row first, as block_mask_row_order
  std::stable_sort(q_order.begin(), q_order.end(), [&](int a, int b) { return kv_tiles[size_t(a)] > kv_tiles[size_t(b)]; });
  kern::AttnParams p{};
  p.B = 2, p.Hq = 16, p.L = p.S = 8192, p.q_block = 128, p.nq = 64, p.mask_B = p.mask_H = 1;
  auto makespan = [&](const int* rows) {
    p.q_order = rows;
    const auto o = kern::sm90::fwd_tile_order<128, 128, 128>(p);
    return queue_makespan(o.count, [&](int t) {
      return kv_tiles[size_t(o.at<128>(kern::sm90::fwd_ordered_index<128>(o, p, t)).q0 / 128)] + 0.5;
    });
  };
  const double natural = makespan(nullptr), sorted = makespan(q_order.data());
  EXPECT_DOUBLE_EQ(natural, 138.0);
  EXPECT_DOUBLE_EQ(sorted, 134.5);
  EXPECT_LT(sorted, 1.02 * (32 * (std::accumulate(kv_tiles.begin(), kv_tiles.end(), 0) + 32.0)) / 132);
}

// Words of the queue: one per (device, stream) for eager launches, a fresh one per captured launch,
// none (static stride) when a capture would need an allocation; chunks are allocated zeroed, on need.
TEST(Sm90Host, TileQueueWordsPerStreamAndPerCapture) {
  std::vector<std::vector<unsigned>> chunks;
  bool fail = false;
  runtime::TileQueuePool pool([&](size_t bytes) -> uintptr_t {
    if (fail) return 0;
    chunks.emplace_back(bytes / sizeof(unsigned), 0u);
    return reinterpret_cast<uintptr_t>(chunks.back().data());
  });
  chunks.reserve(16);  // the fake chunks must not move
  void* s1 = reinterpret_cast<void*>(0x1000);
  void* s2 = reinterpret_cast<void*>(0x2000);
  EXPECT_EQ(pool.word(0, s1, true, false), nullptr);  // a capture before any chunk: static stride
  EXPECT_EQ(pool.chunks(0), 0u);
  unsigned* a = pool.word(0, s1, false, false);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(*a, 0u);
  EXPECT_EQ(pool.word(0, s1, false, false), a);  // launches on one stream are ordered: one word
  unsigned* b = pool.word(0, s2, false, false);
  EXPECT_NE(b, a);
  EXPECT_NE(pool.word(1, s1, false, false), a);  // another device, another word (and chunk)
  EXPECT_EQ(pool.chunks(1), 1u);
  unsigned* null_stream = pool.word(0, nullptr, false, false);
  EXPECT_NE(null_stream, a);
  EXPECT_NE(null_stream, b);
  // The per-thread default stream is a different stream on every host thread.
  unsigned* mine = pool.word(0, reinterpret_cast<void*>(0x2), false, true);
  unsigned* theirs = nullptr;
  std::thread([&] { theirs = pool.word(0, reinterpret_cast<void*>(0x2), false, true); }).join();
  EXPECT_NE(mine, theirs);
  EXPECT_EQ(pool.word(0, reinterpret_cast<void*>(0x2), false, true), mine);
  // Captures: a fresh word each time (a graph's replays may overlap eager launches on its stream).
  unsigned* g1 = pool.word(0, s1, true, false);
  unsigned* g2 = pool.word(0, s1, true, false);
  EXPECT_TRUE(g1 != nullptr && g2 != nullptr && g1 != g2 && g1 != a && g2 != a);
  // Exhaust the chunk: eager launches allocate the next one, captures then get none.
  const int left = runtime::TileQueuePool::kWordsPerChunk - 7;  // a, b, null, mine, theirs, g1, g2
  for (int i = 0; i < left; ++i) ASSERT_NE(pool.word(0, s1, true, false), nullptr) << i;
  EXPECT_EQ(pool.word(0, s1, true, false), nullptr);
  EXPECT_EQ(pool.chunks(0), 1u);
  unsigned* c = pool.word(0, reinterpret_cast<void*>(0x3000), false, false);
  EXPECT_NE(c, nullptr);
  EXPECT_EQ(pool.chunks(0), 2u);
  EXPECT_NE(pool.word(0, s1, true, false), nullptr);
  // No memory: no word, and the next call may try again.
  for (int i = 0; i < runtime::TileQueuePool::kWordsPerChunk; ++i) pool.word(0, s1, true, false);
  fail = true;
  EXPECT_EQ(pool.word(0, reinterpret_cast<void*>(0x4000), false, false), nullptr);
  fail = false;
  EXPECT_NE(pool.word(0, reinterpret_cast<void*>(0x4000), false, false), nullptr);
  EXPECT_EQ(pool.word(0, s1, false, false), a);
}

TEST(Sm90Host, PersistentCtasAndTheTileQueueSwitch) {
  unsetenv("FLEXATTN_SM90_PERSISTENT_CTAS");
  EXPECT_EQ(runtime::sm90_persistent_ctas(132), 132);
  setenv("FLEXATTN_SM90_PERSISTENT_CTAS", "3", 1);
  EXPECT_EQ(runtime::sm90_persistent_ctas(132), 3);
  EXPECT_EQ(kern::sm90_fwd_launch(128, 128, false, 2, 16, 8192, runtime::sm90_persistent_ctas(132), true).grid_x, 3u);
  setenv("FLEXATTN_SM90_PERSISTENT_CTAS", "500", 1);  // never more than one per SM
  EXPECT_EQ(runtime::sm90_persistent_ctas(132), 132);
  setenv("FLEXATTN_SM90_PERSISTENT_CTAS", "-1", 1);
  EXPECT_EQ(runtime::sm90_persistent_ctas(132), 132);
  unsetenv("FLEXATTN_SM90_PERSISTENT_CTAS");
  setenv("FLEXATTN_SM90_TILE_QUEUE", "0", 1);  // the static stride: no word, no driver call
  EXPECT_EQ(runtime::sm90_tile_queue(0, nullptr), nullptr);
  unsetenv("FLEXATTN_SM90_TILE_QUEUE");
}

// The tall tile (FLEXATTN_SM90_FWD_TALL): three consumer warpgroups of 64 rows at D = Dv = 64 only (not narrow), 512
// threads, a Q half per warpgroup in each of the persistent kernel's two Q buffers, launch geometry in 192-row
// tiles; asked for only by calls without a block mask.
TEST(Sm90Host, TallTileAppliesAtHeadDim64WithoutABlockMask) {
  const kern::Sm90FwdTile t = kern::sm90_fwd_tile(64, 64, false, true);
  EXPECT_EQ(t.block_m, 192);
  EXPECT_EQ(t.block_n, 128);
  EXPECT_EQ(t.warpgroups, 3);
  EXPECT_EQ(kern::sm90_fwd_tile(64, 64, false, false).warpgroups, 2);
  EXPECT_EQ(kern::sm90_fwd_tile(64, 64, true, true).block_m, 128);     // narrow: the usual tile
  EXPECT_EQ(kern::sm90_fwd_tile(128, 128, false, true).block_m, 128);  // D = 128: the usual tile
  EXPECT_EQ(kern::sm90_fwd_tile(64, 128, false, true).block_m, 128);
  EXPECT_EQ(kern::sm90_fwd_threads(64, 64, false, true), 512);
  EXPECT_EQ(kern::sm90_fwd_threads(64, 64, false, false), 384);
  const kern::Sm90FwdSmem per = kern::sm90_fwd_smem_layout(64, 64, false, true, true);
  EXPECT_EQ(per.q_bufs, 2);
  EXPECT_EQ(per.k, 2 * 3 * per.q_half);
  EXPECT_EQ(per.q_half, 64 * 64 * 2);
  EXPECT_EQ(kern::sm90_fwd_smem_layout(64, 64, false, false, true).k, 3 * per.q_half);
  EXPECT_LE(kern::sm90_fwd_smem(64, 64, false, true, true), kern::kSm90SmemLimit);
  const kern::Sm90Launch l = kern::sm90_fwd_launch(64, 64, false, 2, 16, 8192, 132, false, true);
  EXPECT_EQ(l.grid_x, 43u * 32u);  // ceil(8192 / 192) tiles per head
  EXPECT_EQ(l.block, 512u);
  EXPECT_EQ(l.smem, unsigned(kern::sm90_fwd_smem(64, 64, false, false, true)));
  EXPECT_EQ(kern::sm90_fwd_launch(64, 64, false, 2, 16, 8192, 132, true, true).grid_x, 132u);
  EXPECT_EQ(kern::sm90_fwd_launch(64, 64, false, 1, 1, 193, 132, true, true).grid_x, 2u);

  unsetenv("FLEXATTN_SM90_FWD_TALL");
  EXPECT_TRUE(runtime::sm90_fwd_tall_requested(64, 64, false));  // on by default (session 22)
  setenv("FLEXATTN_SM90_FWD_TALL", "0", 1);
  EXPECT_FALSE(runtime::sm90_fwd_tall_requested(64, 64, false));
  setenv("FLEXATTN_SM90_FWD_TALL", "1", 1);
  EXPECT_TRUE(runtime::sm90_fwd_tall_requested(64, 64, false));
  EXPECT_FALSE(runtime::sm90_fwd_tall_requested(64, 64, true));  // a block mask: 128-row mask tiles
  EXPECT_FALSE(runtime::sm90_fwd_tall_requested(128, 128, false));
  EXPECT_FALSE(runtime::sm90_fwd_tall_requested(64, 128, false));
  setenv("FLEXATTN_SM90_FWD_TALL", "maybe", 1);  // not a flag value: the default, as for every flag (jit/sys.cc)
  EXPECT_TRUE(runtime::sm90_fwd_tall_requested(64, 64, false));
  unsetenv("FLEXATTN_SM90_FWD_TALL");

  // The source: 512-thread launch bounds and the tall template argument only when the key asks and it applies.
  Variant v;
  const codegen::GeneratedVariant gen = codegen::emit_cuda_variant(v, false);
  runtime::KernelSetKey key{DType::BF16, 64, 64, "sm_90a", false, runtime::KernelFamily::sm90};
  const std::string usual = runtime::kernel_source_sm90(gen, key);
  EXPECT_NE(usual.find("__launch_bounds__(kSm90Threads, 1)"), std::string::npos);
  EXPECT_NE(usual.find("attn_fwd_sm90<FlexVariant, bf16, 64, 64, false, true>(p)"), std::string::npos);
  key.sm90_fwd_tall = true;
  EXPECT_TRUE(runtime::sm90_fwd_form(gen, key).tall);
  const std::string tall = runtime::kernel_source_sm90(gen, key);
  EXPECT_NE(tall.find("__launch_bounds__(kSm90TallThreads, 1)"), std::string::npos);
  EXPECT_NE(tall.find("attn_fwd_sm90<FlexVariant, bf16, 64, 64, false, true, true>(p)"), std::string::npos);
  key.d = key.dv = 128;
  EXPECT_FALSE(runtime::sm90_fwd_form(gen, key).tall);
  EXPECT_NE(runtime::kernel_source_sm90(gen, key).find("attn_fwd_sm90<FlexVariant, bf16, 128, 128, false, true>(p)"),
            std::string::npos);
}
