// Host side of the sm90 backward, no GPU or NVRTC needed: the FLEXATTN_SM90_BWD switch (default on),
// the support rules and their reasons, the tile table / shared-memory layout, the launch geometry,
// the generated source, and the tensor maps (dO in o_map) without a driver.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <vector>

#include "common/params.h"
#include "flexattn/codegen.h"
#include "flexattn/error.h"
#include "flexattn/mods.h"
#include "jit/driver_api.h"
#include "runtime/kernel_set.h"
#include "runtime/sm90_backward.h"
#include "runtime/tma_sm90.h"
#include "sm90/fwd_scheduler_sm90.cuh"
#include "sm90/tile_config_sm90_bwd.h"
#include "compile/sm90/sm90_host_util.h"

using namespace flexattn;

using sm90_test::eligible_params;
using sm90_test::error_of;
using sm90_test::g_data;

TEST(Sm90BwdHost, OnByDefaultAndSwitchedOffByTheEnvironment) {
  unsetenv("FLEXATTN_SM90_BWD");
  EXPECT_TRUE(runtime::sm90_backward_requested());
  setenv("FLEXATTN_SM90_BWD", "1", 1);
  EXPECT_TRUE(runtime::sm90_backward_requested());
  setenv("FLEXATTN_SM90_BWD", "on", 1);
  EXPECT_TRUE(runtime::sm90_backward_requested());
  setenv("FLEXATTN_SM90_BWD", "0", 1);
  EXPECT_FALSE(runtime::sm90_backward_requested());
  unsetenv("FLEXATTN_SM90_BWD");
}

TEST(Sm90BwdHost, OptOutNeverLooksAtTheProblem) {
  setenv("FLEXATTN_SM90_BWD", "0", 1);
  BackwardArgs a;  // nothing filled: the hook must return before reading any of it
  kern::AttnParams p = eligible_params();
  EXPECT_FALSE(runtime::try_sm90_backward(a, p, "sm_90a"));
  unsetenv("FLEXATTN_SM90_BWD");
}

TEST(Sm90BwdHost, SupportRulesAndReasons) {
  kern::AttnParams p = eligible_params();
  std::string why;
  EXPECT_TRUE(runtime::sm90_backward_supported("sm_90a", p, &why)) << why;
  EXPECT_FALSE(runtime::sm90_backward_supported("sm_80", p, &why));
  EXPECT_EQ(why, "backward: the device is sm_80, the sm90 kernels need sm_90a");
  for (int d : {64, 128}) {
    for (int dv : {64, 128}) {
      p.D = d, p.Dv = dv;
      EXPECT_TRUE(runtime::sm90_backward_supported("sm_90a", p, &why)) << d << " " << dv << ": " << why;
    }
  }
  p.D = p.Dv = 256;  // the wide kernel
  EXPECT_TRUE(runtime::sm90_backward_supported("sm_90a", p, &why)) << why;
  // Padded head dims (FLEXATTN_SM90_BWD_PAD_HEAD_DIM with FLEXATTN_SM90_PAD_HEAD_DIM, both on by default): multiples
  // of 16 run on the next compiled kernel; `0` turns it off.
  unsetenv("FLEXATTN_SM90_PAD_HEAD_DIM");
  setenv("FLEXATTN_SM90_BWD_PAD_HEAD_DIM", "0", 1);
  p.D = p.Dv = 192;
  EXPECT_FALSE(runtime::sm90_backward_supported("sm_90a", p, &why));
  EXPECT_EQ(why, "backward: head dims D=192, Dv=192 (the sm90 backward takes 64 and 128, and D = Dv = 256; with "
                 "FLEXATTN_SM90_PAD_HEAD_DIM and FLEXATTN_SM90_BWD_PAD_HEAD_DIM on, the default, the multiples of 16 "
                 "between them run on the next of them)");
  unsetenv("FLEXATTN_SM90_BWD_PAD_HEAD_DIM");
  p.D = p.Dv = 192;  // on the wide kernel
  EXPECT_TRUE(runtime::sm90_backward_supported("sm_90a", p, &why)) << why;
  p.D = 128, p.Dv = 96;
  EXPECT_TRUE(runtime::sm90_backward_supported("sm_90a", p, &why)) << why;
  p.D = p.Dv = 80;
  EXPECT_TRUE(runtime::sm90_backward_supported("sm_90a", p, &why)) << why;
  p.D = 256, p.Dv = 128;  // the wide kernel takes D = Dv only
  EXPECT_FALSE(runtime::sm90_backward_supported("sm_90a", p, &why));
  p.D = 192, p.Dv = 96;
  EXPECT_FALSE(runtime::sm90_backward_supported("sm_90a", p, &why));
  EXPECT_EQ(why, "backward: head dims D=192, Dv=96 (the sm90 backward takes 64 and 128, and D = Dv = 256, and multiples "
                 "of 16 between 64 and 256 on the next of them)");
  p.D = p.Dv = 72;  // not a multiple of 16
  EXPECT_FALSE(runtime::sm90_backward_supported("sm_90a", p, &why));
  setenv("FLEXATTN_SM90_PAD_HEAD_DIM", "0", 1);  // the forward's switch turns the backward's off too
  p.D = 128, p.Dv = 96;
  EXPECT_FALSE(runtime::sm90_backward_supported("sm_90a", p, &why));
  unsetenv("FLEXATTN_SM90_PAD_HEAD_DIM");
  unsetenv("FLEXATTN_SM90_BWD_PAD_HEAD_DIM");
  p = eligible_params();
  static const int counts[1] = {1};
  p.kv_num_blocks = counts;
  p.q_block = 128, p.kv_block = 128;
  EXPECT_TRUE(runtime::sm90_backward_supported("sm_90a", p, &why)) << why;
  p.q_block = 64;  // query tiles are 64 rows
  EXPECT_TRUE(runtime::sm90_backward_supported("sm_90a", p, &why)) << why;
  p.kv_block = 64;  // but a kv tile is 128 rows and must sit in one mask column
  EXPECT_FALSE(runtime::sm90_backward_supported("sm_90a", p, &why));
  EXPECT_EQ(why, "backward: block mask BLOCK_SIZE (64, 64) is not a multiple of (64, 128)");
  p.q_block = 32, p.kv_block = 128;
  EXPECT_FALSE(runtime::sm90_backward_supported("sm_90a", p, &why));
  // The wide kernel's kv tiles are 64 rows: a 64-row kv block is enough there.
  p.D = p.Dv = 256;
  p.q_block = 64, p.kv_block = 64;
  EXPECT_TRUE(runtime::sm90_backward_supported("sm_90a", p, &why)) << why;
  p.kv_block = 32;
  EXPECT_FALSE(runtime::sm90_backward_supported("sm_90a", p, &why));
  EXPECT_EQ(why, "backward: block mask BLOCK_SIZE (64, 32) is not a multiple of (64, 64)");
}

TEST(Sm90BwdHost, TileTableLayoutAndLaunch) {
  EXPECT_TRUE(kern::sm90_bwd_head_dims_ok(64, 128));
  EXPECT_FALSE(kern::sm90_bwd_head_dims_ok(192, 192));
  EXPECT_TRUE(kern::sm90_bwd_mask_blocks_ok(1 << 30, 1 << 30));  // the no-mask sentinel
  for (int d : {64, 128}) {
    for (int dv : {64, 128}) {
      const kern::Sm90BwdSmem s = kern::sm90_bwd_smem_layout(d, dv);
      for (int off : {s.k, s.v, s.q, s.dout, s.ds, s.k + s.k_half, s.v + s.v_half, s.q + s.q_stage,
                      s.dout + s.do_stage, s.ds + s.ds_tile})
        EXPECT_EQ(off % 1024, 0) << d << " " << dv << ": swizzled tiles start on 1024 bytes";
      EXPECT_EQ(s.bars % 8, 0);
      EXPECT_LE(kern::sm90_bwd_smem(d, dv), kern::kSm90SmemLimit);
    }
  }
  // d128: K 32 + V 32 + Q 2 x 16 + dO 2 x 16 + dS 2 x 8 KiB, then lse / delta, barriers, info.
  EXPECT_EQ(kern::sm90_bwd_smem_layout(128, 128).lse, 144 * 1024);
  const kern::Sm90Launch l = kern::sm90_bwd_launch(128, 128, 1, 8, 1000);
  EXPECT_EQ(l.grid_x, 8u);  // ceil(1000 / 128) kv tiles
  EXPECT_EQ(l.grid_y, 8u);
  EXPECT_EQ(l.grid_z, 1u);  // Bkv = 1: one CTA walks every batch
  EXPECT_EQ(l.block, 384u);
  EXPECT_EQ(l.smem, unsigned(kern::sm90_bwd_smem(128, 128)));
  // The wide kernel (D = Dv = 256): 64-row kv tiles; K, V, Q, dO 32 KiB each, P^T / dS^T 2 x 2 x 8 KiB, the
  // 64 KiB fp32 dQ tile, then lse / delta (one stage), barriers (kv, full, empty), info, dQ barriers, dQ info;
  // the dQ flags do not change it.
  EXPECT_TRUE(kern::sm90_bwd_head_dims_ok(256, 256));
  EXPECT_FALSE(kern::sm90_bwd_head_dims_ok(256, 128));
  const kern::Sm90BwdSmem w = kern::sm90_bwd_smem_layout(256, 256);
  EXPECT_EQ(w.v, 32 * 1024);
  EXPECT_EQ(w.q, 64 * 1024);
  EXPECT_EQ(w.dout, 96 * 1024);
  EXPECT_EQ(w.ds, 128 * 1024);
  EXPECT_EQ(w.p, 144 * 1024);
  EXPECT_EQ(w.dq, 160 * 1024);
  EXPECT_EQ(w.dq_buf, 64 * 1024);
  EXPECT_EQ(w.lse, 224 * 1024);
  EXPECT_EQ(w.bars, 224 * 1024 + 512);
  EXPECT_EQ(w.dq_bars, w.info + 16);
  EXPECT_EQ(w.total, w.dq_info + 8);
  EXPECT_EQ(kern::sm90_bwd_smem(256, 256, true, false, true), kern::sm90_bwd_smem(256, 256));
  EXPECT_LE(kern::sm90_bwd_smem(256, 256), kern::kSm90SmemLimit);
  const kern::Sm90Launch wl = kern::sm90_bwd_launch(256, 256, 2, 4, 1000, true, false, true);
  EXPECT_EQ(wl.grid_x, 16u);  // ceil(1000 / 64)
  EXPECT_EQ(wl.grid_y, 4u);
  EXPECT_EQ(wl.grid_z, 2u);
  EXPECT_EQ(wl.smem, unsigned(kern::sm90_bwd_smem(256, 256)));
}

TEST(Sm90BwdHost, SourceHasTheHopperMainKernelAndTheSm80Helpers) {
  Variant v;
  v.mask_mod = mods::causal();
  v.score_mod = mods::softcap(20);
  const codegen::GeneratedVariant gen = codegen::emit_cuda_variant(v, true);
  runtime::KernelSetKey key{DType::F16, 64, 128, "sm_90a", true, runtime::KernelFamily::sm90};
  const std::string src = runtime::kernel_source_sm90_bwd(gen, key);
  EXPECT_NE(src.find("#include \"sm90/attn_bwd_sm90.cuh\""), std::string::npos) << src;
  // The default at D = 64: the first kernel, bulk dQ, v3's TMA reductions (kDqBulk, kV2 = false, kDqTma).
  EXPECT_NE(src.find("flexattn_bwd(const __grid_constant__ AttnParams p) { attn_bwd_sm90<FlexVariant, fp16, 64, 128, true, false, true>(p); }"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("__launch_bounds__(kSm90Threads, 1)"), std::string::npos) << src;
  // The TMA-store epilogue is compiled in by default, not when asked not to nor in the persistent kernel.
  EXPECT_TRUE(runtime::sm90_bwd_source_choice(src).tma_store);
  EXPECT_FALSE(runtime::sm90_bwd_source_choice(runtime::kernel_source_sm90_bwd(gen, key, -1, -1, -1, -1, 0)).tma_store);
  EXPECT_FALSE(runtime::sm90_bwd_source_choice(runtime::kernel_source_sm90_bwd(gen, key, -1, -1, 1)).tma_store);
  // The preprocess and the dQ convert are a program of their own, the same for every variant (session 26).
  const std::string aux = runtime::kernel_source_bwd_aux(key);
  for (const char* e : {"flexattn_bwd_preprocess(", "flexattn_bwd_dq_convert("}) {
    EXPECT_EQ(src.find(e), std::string::npos) << e;
    EXPECT_NE(aux.find(e), std::string::npos) << e;
  }
  EXPECT_NE(aux.find("attn_bwd_preprocess_sm80<fp16, 64, 128>(p)"), std::string::npos) << aux;
  EXPECT_NE(aux.find("attn_bwd_dq_convert_sm80<fp16, 64>(p)"), std::string::npos) << aux;
  EXPECT_EQ(aux.find("FlexVariant"), std::string::npos) << aux;
  // The deterministic dQ pass is a kernel set of its own (sm80 family, KernelSetKey::dq_pass), compiled at
  // the first deterministic call: not in this source.
  EXPECT_EQ(src.find("flexattn_bwd_dq("), std::string::npos) << src;
  EXPECT_EQ(runtime::kernel_source_sm90(gen, key), src);  // the family's generator dispatches here
  key.d = 256;
  EXPECT_EQ(error_of([&] { runtime::kernel_source_sm90_bwd(gen, key); }),
            "head dims: the sm90 backward takes 64 or 128, or D = Dv = 256, got D=256, Dv=128");
  // D = Dv = 256: the wide kernel, whose one dQ path is bulk with TMA reductions.
  key.dtype = DType::BF16, key.dv = 256;
  EXPECT_NE(runtime::kernel_source_sm90_bwd(gen, key).find("attn_bwd_sm90<FlexVariant, bf16, 256, 256, true, false, true>(p)"),
            std::string::npos);
}

TEST(Sm90BwdHost, EncodingWithoutADriverNamesTheTensor) {
  std::string err;
  if (jit::try_driver(&err) != nullptr) GTEST_SKIP() << "a CUDA driver is present";
  kern::AttnParams p{};
  p.q = p.k = p.v = p.dout = g_data;
  p.B = p.Hq = p.Hkv = p.Bkv = 1;
  p.L = p.S = 8;
  p.D = p.Dv = 64;
  p.q_sl = p.k_sl = p.v_sl = p.dout_sl = 64;
  p.q_sh = p.k_sh = p.v_sh = p.dout_sh = p.q_sb = p.k_sb = p.v_sb = p.dout_sb = 512;
  const std::string msg = error_of([&] { runtime::encode_sm90_backward_maps(&p, DType::BF16); });
  EXPECT_EQ(msg.rfind("q: the sm90 kernels need the CUDA driver: ", 0), 0u) << msg;
}

// The dK / dV maps of the TMA-store epilogue: a layout (or a machine) the encoder rejects means the per-pair stores,
// never an error; the map arguments are k_map's shape over dK.
TEST(Sm90BwdHost, DkvMapsFallBackQuietly) {
  kern::AttnParams p{};
  p.dk = p.dv = g_data;
  p.Bkv = 2, p.Hkv = 4, p.S = 100, p.D = p.Dv = 128;
  p.dk_sl = p.dv_sl = 3;  // not a multiple of 8 elements: no TMA map, with or without a driver
  p.dk_sh = p.dv_sh = 300, p.dk_sb = p.dv_sb = 1200;
  EXPECT_FALSE(runtime::encode_sm90_dkv_maps(&p, DType::BF16));
  std::string err;
  if (jit::try_driver(&err) == nullptr) {
    p.dk_sl = p.dv_sl = 128, p.dk_sh = p.dv_sh = 12800, p.dk_sb = p.dv_sb = 4 * 12800;
    EXPECT_FALSE(runtime::encode_sm90_dkv_maps(&p, DType::BF16)) << "no driver: no maps, no throw";
  }
  const runtime::TmaMapArgs a = runtime::sm90_map_args("dk", g_data, DType::BF16, 2, 4, 100, 128, 4 * 12800, 12800, 128, 64);
  EXPECT_EQ(a.dims[1], 100u);  // rows >= S fall outside: the epilogue's boxes skip them
  EXPECT_EQ(a.dims[2], 4u);
  EXPECT_EQ(a.dims[3], 2u);
}

TEST(Sm90BwdHost, DoutMapArgsUse64RowBoxes) {
  // dO [B=2, H=4, L=100, Dv=128], contiguous: the map the producer reads dO through (o_map).
  const runtime::TmaMapArgs a =
      runtime::sm90_map_args("dout", g_data, DType::BF16, 2, 4, 100, 128, 4 * 12800, 12800, 128, 64);
  EXPECT_EQ(a.dims[0], 128u);
  EXPECT_EQ(a.dims[1], 100u);
  EXPECT_EQ(a.box[0], 64u);
  EXPECT_EQ(a.box[1], 64u);
  EXPECT_EQ(a.strides[0], 256u);
}

TEST(Sm90BwdHost, DqBulkIsTheDefaultAndOnlyChangesTheMainKernelsTemplate) {
  setenv("FLEXATTN_SM90_BWD_V2", "0", 1);  // the first kernel's two dQ paths; v2 below
  unsetenv("FLEXATTN_SM90_BWD_DQ_BULK");
  EXPECT_TRUE(runtime::sm90_bwd_dq_bulk_requested());
  setenv("FLEXATTN_SM90_BWD_DQ_BULK", "0", 1);
  EXPECT_FALSE(runtime::sm90_bwd_dq_bulk_requested());
  Variant v;
  v.mask_mod = mods::causal();
  const codegen::GeneratedVariant gen = codegen::emit_cuda_variant(v, true);
  runtime::KernelSetKey key{DType::BF16, 128, 128, "sm_90a", true, runtime::KernelFamily::sm90};
  const std::string plain = runtime::kernel_source_sm90_bwd(gen, key);
  EXPECT_NE(plain.find("attn_bwd_sm90<FlexVariant, bf16, 128, 128>(p)"), std::string::npos) << plain;
  setenv("FLEXATTN_SM90_BWD_DQ_BULK", "1", 1);
  EXPECT_TRUE(runtime::sm90_bwd_dq_bulk_requested());
  const std::string bulk = runtime::kernel_source_sm90_bwd(gen, key);
  EXPECT_NE(bulk.find("attn_bwd_sm90<FlexVariant, bf16, 128, 128, true>(p)"), std::string::npos) << bulk;
  // Nothing else in the set changes: the sm80 entries are the same text.
  const size_t at = plain.find("attn_bwd_sm90<FlexVariant, bf16, 128, 128>(p)");
  std::string expect = plain;
  expect.replace(at, std::string("attn_bwd_sm90<FlexVariant, bf16, 128, 128>(p)").size(),
                 "attn_bwd_sm90<FlexVariant, bf16, 128, 128, true>(p)");
  EXPECT_EQ(bulk, expect);
  setenv("FLEXATTN_SM90_BWD_DQ_BULK", "0", 1);
  EXPECT_FALSE(runtime::sm90_bwd_dq_bulk_requested());
  unsetenv("FLEXATTN_SM90_BWD_DQ_BULK");
  unsetenv("FLEXATTN_SM90_BWD_V2");
}

TEST(Sm90BwdHost, DqBulkLayoutAppendsTheDqTilesAndKeepsTheRest) {
  for (int d : {64, 128}) {
    for (int dv : {64, 128}) {
      const kern::Sm90BwdSmem a = kern::sm90_bwd_smem_layout(d, dv), b = kern::sm90_bwd_smem_layout(d, dv, true);
      // Every offset of the default layout is unchanged; the dQ fields are 0 there.
      EXPECT_EQ(a.k, b.k);
      EXPECT_EQ(a.q, b.q);
      EXPECT_EQ(a.ds, b.ds);
      EXPECT_EQ(a.lse, b.lse);
      EXPECT_EQ(a.bars, b.bars);
      EXPECT_EQ(a.info, b.info);
      EXPECT_EQ(a.dq + a.dq_buf + a.dq_row + a.dq_bars + a.dq_info, 0);
      EXPECT_EQ(b.dq_row, 4 * d + kern::kSm90BwdDqRowPad);
      EXPECT_EQ(b.dq_buf, kern::kSm90BwdBlockM * b.dq_row);
      EXPECT_GE(b.dq, a.info + 16 * kern::kSm90BwdStages);
      EXPECT_EQ(b.dq % 128, 0);
      EXPECT_EQ(b.dq_row % 16, 0) << "bulk sources are 16-byte aligned";
      // Half-warp bank check of the accumulator stores: rows g = 0..3, columns 2t (t = 0..3), 8 bytes.
      std::set<int> banks;
      for (int g = 0; g < 4; ++g)
        for (int t = 0; t < 4; ++t)
          for (int e = 0; e < 2; ++e) banks.insert(((g * b.dq_row + 8 * t) / 4 + e) % 32);
      EXPECT_EQ(banks.size(), 32u) << d;
      EXPECT_EQ(b.dq_bars, b.dq + kern::kSm90BwdDqBuffers * b.dq_buf);
      EXPECT_EQ(b.dq_bars % 8, 0);
      EXPECT_LE(kern::sm90_bwd_smem(d, dv, true), kern::kSm90SmemLimit) << d << " " << dv;
    }
  }
  // d128: 146 KiB before, + 2 x 34 KiB of dQ tiles (+ barriers, info, alignment), + the buffer-gradient scratch.
  EXPECT_EQ(kern::sm90_bwd_smem_layout(128, 128, true).dq_buf, 64 * 544);
  EXPECT_EQ(kern::sm90_bwd_smem(128, 128, true), 219312 + 5184);
  EXPECT_EQ(kern::sm90_bwd_launch(128, 128, 1, 8, 1000, true).smem, 219312u + 5184u);
  EXPECT_EQ(kern::sm90_bwd_launch(128, 128, 1, 8, 1000).smem, unsigned(kern::sm90_bwd_smem(128, 128)));
}

// FLEXATTN_SM90_BWD_V2: on by default since session 4 (=0 turns it off); only D = 128 sets get the v2 main kernel (kV2 = true after
// kDqBulk, which follows FLEXATTN_SM90_BWD_DQ_BULK or the explicit dq_bulk argument); nothing else in
// the set changes, and sm90_bwd_source_choice reads both arguments back.
TEST(Sm90BwdHost, V2IsTheDefaultForD128AndOnlyChangesTheMainKernelsTemplate) {
  unsetenv("FLEXATTN_SM90_BWD_V2");
  unsetenv("FLEXATTN_SM90_BWD_DQ_BULK");
  setenv("FLEXATTN_SM90_BWD_V3", "0", 1);  // v2's own sources; v3 on top of them: the next tests
  EXPECT_TRUE(runtime::sm90_bwd_v2_requested());
  setenv("FLEXATTN_SM90_BWD_V2", "0", 1);
  EXPECT_FALSE(runtime::sm90_bwd_v2_requested());
  EXPECT_FALSE(runtime::sm90_bwd_v2_selected(128, 128));
  Variant v;
  v.mask_mod = mods::causal();
  const codegen::GeneratedVariant gen = codegen::emit_cuda_variant(v, true);
  runtime::KernelSetKey key{DType::BF16, 128, 128, "sm_90a", true, runtime::KernelFamily::sm90};
  const std::string red = runtime::kernel_source_sm90_bwd(gen, key, 0), bulk = runtime::kernel_source_sm90_bwd(gen, key);
  const std::string call_red = "attn_bwd_sm90<FlexVariant, bf16, 128, 128>(p)";
  const std::string call_bulk = "attn_bwd_sm90<FlexVariant, bf16, 128, 128, true>(p)";
  ASSERT_NE(red.find(call_red), std::string::npos) << red;
  ASSERT_NE(bulk.find(call_bulk), std::string::npos) << bulk;
  EXPECT_FALSE(runtime::sm90_bwd_source_choice(red).dq_bulk);
  EXPECT_FALSE(runtime::sm90_bwd_source_choice(red).v2);
  EXPECT_TRUE(runtime::sm90_bwd_source_choice(bulk).dq_bulk);
  EXPECT_FALSE(runtime::sm90_bwd_source_choice(bulk).v2);

  setenv("FLEXATTN_SM90_BWD_V2", "1", 1);
  EXPECT_TRUE(runtime::sm90_bwd_v2_selected(128, 128));
  EXPECT_TRUE(runtime::sm90_bwd_v2_selected(128, 64));
  EXPECT_FALSE(runtime::sm90_bwd_v2_selected(64, 64));
  EXPECT_FALSE(runtime::sm90_bwd_v2_selected(64, 128));
  // The first kernel at D + Dv = 256 has no TMA-store define (it stores dK / dV pair by pair there, session 31); the
  // v2's bulk path has it, and otherwise the same source but for its template argument.
  const std::string tma_define = "#define FLEXATTN_SM90_BWD_TMA_STORE 1\n";
  EXPECT_EQ(bulk.find(tma_define), std::string::npos);
  EXPECT_EQ(red.find(tma_define), std::string::npos);
  EXPECT_FALSE(runtime::sm90_bwd_source_choice(bulk).tma_store);
  std::string expect = bulk;
  expect.replace(bulk.find(call_bulk), call_bulk.size(), "attn_bwd_sm90<FlexVariant, bf16, 128, 128, true, true>(p)");
  const std::string v2_bulk = runtime::kernel_source_sm90_bwd(gen, key);
  ASSERT_NE(v2_bulk.find(tma_define), std::string::npos);
  expect.insert(v2_bulk.find(tma_define), tma_define);
  EXPECT_EQ(v2_bulk, expect);
  EXPECT_TRUE(runtime::sm90_bwd_source_choice(v2_bulk).dq_bulk);
  EXPECT_TRUE(runtime::sm90_bwd_source_choice(v2_bulk).v2);
  // The per-element fallback of get_kernel_set (dq_bulk = 0) keeps v2, without the TMA-store define: the v2 kernel
  // compiles that epilogue in only beside the bulk path.
  expect = red;
  expect.replace(red.find(call_red), call_red.size(), "attn_bwd_sm90<FlexVariant, bf16, 128, 128, false, true>(p)");
  const std::string v2_red = runtime::kernel_source_sm90_bwd(gen, key, 0);
  EXPECT_EQ(v2_red, expect);
  EXPECT_FALSE(runtime::sm90_bwd_source_choice(v2_red).dq_bulk);
  EXPECT_TRUE(runtime::sm90_bwd_source_choice(v2_red).v2);
  setenv("FLEXATTN_SM90_BWD_DQ_BULK", "0", 1);
  EXPECT_EQ(runtime::kernel_source_sm90_bwd(gen, key), v2_red);
  unsetenv("FLEXATTN_SM90_BWD_DQ_BULK");
  // Other head dims keep the default kernel.
  runtime::KernelSetKey k64{DType::BF16, 64, 64, "sm_90a", true, runtime::KernelFamily::sm90};
  EXPECT_NE(runtime::kernel_source_sm90_bwd(gen, k64).find("attn_bwd_sm90<FlexVariant, bf16, 64, 64, true>(p)"),
            std::string::npos);
  setenv("FLEXATTN_SM90_BWD_V2", "0", 1);
  EXPECT_EQ(runtime::kernel_source_sm90_bwd(gen, key), bulk);
  unsetenv("FLEXATTN_SM90_BWD_V2");
  EXPECT_EQ(runtime::kernel_source_sm90_bwd(gen, key), v2_bulk);
  unsetenv("FLEXATTN_SM90_BWD_V3");
}

// The first kernel's buffer-gradient scratch (bg_wg_store / bg_wg_flush): in every first-kernel layout, last (after
// the dQ tiles and the rank ring), 16-aligned, two stages of two warpgroups; none in the v2 or the wide layout.
TEST(Sm90BwdHost, BufferGradientScratchEndsEveryFirstKernelLayout) {
  for (int d : {64, 128})
    for (int dv : {64, 128})
      for (int bulk = 0; bulk < 2; ++bulk)
        for (int tma = 0; tma <= bulk; ++tma) {
          const kern::Sm90BwdSmem s = kern::sm90_bwd_smem_layout(d, dv, bulk, false, tma);
          EXPECT_EQ(s.bg % 16, 0);
          EXPECT_GE(s.bg, std::max({s.info + 16 * kern::kSm90BwdStages, s.dq_info + 8 * 2, s.dq_rank + kern::kSm90BwdRankRingBytes}));
          EXPECT_EQ(s.total - s.bg, kern::kSm90ConsumerWarpgroups * kern::kSm90BwdStages * kern::kSm90BwdBgBufBytes);
          EXPECT_EQ(kern::kSm90BwdBgBufBytes, 4 * 4 * kern::kSm90BwdBgWarpSlots + 16);
          EXPECT_LE(kern::sm90_bwd_smem(d, dv, bulk, false, tma) + kern::kSm90BwdPersistentSmem, kern::kSm90SmemLimit)
              << d << " " << dv << " " << bulk << " " << tma;
        }
  EXPECT_EQ(kern::sm90_bwd_smem_layout(128, 128, true, true, true).bg, 0);
  EXPECT_EQ(kern::sm90_bwd_smem_layout(256, 256, true, false, true).bg, 0);
}

TEST(Sm90BwdHost, V2LayoutDoublesTheDsTilesAndKeepsWhatComesBefore) {
  for (int dv : {64, 128}) {
    const kern::Sm90BwdSmem a = kern::sm90_bwd_smem_layout(128, dv), b = kern::sm90_bwd_smem_layout(128, dv, false, true);
    EXPECT_EQ(a.k, b.k);
    EXPECT_EQ(a.v, b.v);
    EXPECT_EQ(a.q, b.q);
    EXPECT_EQ(a.dout, b.dout);
    EXPECT_EQ(a.ds, b.ds);
    EXPECT_EQ(b.ds % 1024, 0);
    // [stage][warpgroup] dS^T tiles of 64 x 64 bf16, then lse / delta / barriers / info as before.
    EXPECT_EQ(b.lse - b.ds, kern::kSm90BwdStages * kern::kSm90ConsumerWarpgroups * 64 * 64 * 2);
    EXPECT_EQ(b.lse - a.lse, 16 * 1024);
    EXPECT_EQ(b.info - a.info, 16 * 1024);
    EXPECT_EQ(b.total, b.info + 16 * kern::kSm90BwdStages);  // no buffer-gradient scratch in the v2 layout
    EXPECT_EQ(b.bg, 0);
    EXPECT_EQ(b.bars % 8, 0);
    EXPECT_LE(kern::sm90_bwd_smem(128, dv, false, true), kern::kSm90SmemLimit);
    EXPECT_EQ(kern::sm90_bwd_launch(128, dv, 1, 8, 1000, false, true).smem,
              unsigned(kern::sm90_bwd_smem(128, dv, false, true)));
  }
  // D128 / Dv128: 144 KiB of tiles before, 160 KiB now (+ lse, delta, barriers, info, alignment slack).
  EXPECT_EQ(kern::sm90_bwd_smem_layout(128, 128, false, true).lse, 160 * 1024);
  // With the bulk dQ path: one padded fp32 dQ buffer (two would not fit next to the dS^T pairs).
  for (int dv : {64, 128}) {
    const kern::Sm90BwdSmem a = kern::sm90_bwd_smem_layout(128, dv, false, true),
                            b = kern::sm90_bwd_smem_layout(128, dv, true, true);
    EXPECT_EQ(a.lse, b.lse);
    EXPECT_EQ(a.info, b.info);
    EXPECT_EQ(b.dq_row, 4 * 128 + kern::kSm90BwdDqRowPad);
    EXPECT_GE(b.dq, a.total);
    EXPECT_EQ(b.dq % 128, 0);
    EXPECT_EQ(b.dq_bars, b.dq + b.dq_buf);
    EXPECT_EQ(b.dq_info, b.dq_bars + 16);
    EXPECT_LE(kern::sm90_bwd_smem(128, dv, true, true), kern::kSm90SmemLimit);
  }
  EXPECT_GT(kern::sm90_bwd_smem_layout(128, 128, false, true).total + 2 * kern::sm90_bwd_smem_layout(128, 128, true, true).dq_buf + 1024,
            kern::kSm90SmemLimit);
  EXPECT_EQ(kern::sm90_bwd_dq_buffers(true), 1);        // v2, padded per-row tiles
  EXPECT_EQ(kern::sm90_bwd_dq_buffers(true, true), 2);  // v2, v3's TMA tiles
  EXPECT_EQ(kern::sm90_bwd_dq_buffers(false), kern::kSm90BwdDqBuffers);
  EXPECT_TRUE(kern::sm90_bwd_v2_head_dims_ok(128, 64));
  EXPECT_FALSE(kern::sm90_bwd_v2_head_dims_ok(64, 128));
}

// FLEXATTN_SM90_BWD_V3 (default on since session 5): the bulk dQ main kernels get kDqTma = true (a seventh template
// argument): v2 + bulk at D = 128, and the first kernel's bulk path at D = 64 (kV2 = false; not at
// D = 128 with v2 off); the per-element paths are unchanged, and the source choice reads the argument
// back. Its dQ tile: unpadded 1024-aligned [D / 32][64][32] fp32 slabs per buffer (one buffer in v2, two
// in the first kernel), the rest of the layout as with the bulk path.
TEST(Sm90BwdHost, V3AddsTheTmaDqArgumentToTheBulkPaths) {
  unsetenv("FLEXATTN_SM90_BWD_V2");
  unsetenv("FLEXATTN_SM90_BWD_DQ_BULK");
  unsetenv("FLEXATTN_SM90_BWD_V3");
  EXPECT_TRUE(runtime::sm90_bwd_v3_requested());
  setenv("FLEXATTN_SM90_BWD_V3", "0", 1);
  EXPECT_FALSE(runtime::sm90_bwd_v3_requested());
  Variant v;
  v.mask_mod = mods::causal();
  const codegen::GeneratedVariant gen = codegen::emit_cuda_variant(v, true);
  runtime::KernelSetKey key{DType::BF16, 128, 128, "sm_90a", true, runtime::KernelFamily::sm90};
  runtime::KernelSetKey k64{DType::BF16, 64, 64, "sm_90a", true, runtime::KernelFamily::sm90};
  const std::string v2_bulk = runtime::kernel_source_sm90_bwd(gen, key), v2_red = runtime::kernel_source_sm90_bwd(gen, key, 0);
  const std::string d64 = runtime::kernel_source_sm90_bwd(gen, k64), d64_red = runtime::kernel_source_sm90_bwd(gen, k64, 0);
  EXPECT_FALSE(runtime::sm90_bwd_source_choice(v2_bulk).dq_tma);
  EXPECT_FALSE(runtime::sm90_bwd_source_choice(d64).dq_tma);
  setenv("FLEXATTN_SM90_BWD_V3", "1", 1);
  EXPECT_TRUE(runtime::sm90_bwd_v3_requested());
  auto with = [](std::string src, const std::string& call, const std::string& by) {
    const size_t at = src.find(call);
    EXPECT_NE(at, std::string::npos) << call;
    if (at != std::string::npos) src.replace(at, call.size(), by);
    return src;
  };
  const std::string v3 = runtime::kernel_source_sm90_bwd(gen, key);
  EXPECT_EQ(v3, with(v2_bulk, "attn_bwd_sm90<FlexVariant, bf16, 128, 128, true, true>(p)",
                     "attn_bwd_sm90<FlexVariant, bf16, 128, 128, true, true, true>(p)"));
  const runtime::Sm90BwdChoice c = runtime::sm90_bwd_source_choice(v3);
  EXPECT_TRUE(c.dq_bulk && c.v2 && c.dq_tma);
  EXPECT_EQ(runtime::kernel_source_sm90_bwd(gen, key, 0), v2_red);
  const std::string v3_64 = runtime::kernel_source_sm90_bwd(gen, k64);
  EXPECT_EQ(v3_64, with(d64, "attn_bwd_sm90<FlexVariant, bf16, 64, 64, true>(p)",
                        "attn_bwd_sm90<FlexVariant, bf16, 64, 64, true, false, true>(p)"));
  const runtime::Sm90BwdChoice c64 = runtime::sm90_bwd_source_choice(v3_64);
  EXPECT_TRUE(c64.dq_bulk && !c64.v2 && c64.dq_tma);
  EXPECT_EQ(runtime::kernel_source_sm90_bwd(gen, k64, 0), d64_red);
  // The first kernel at D = 128 (v2 off) keeps its padded dQ tiles.
  setenv("FLEXATTN_SM90_BWD_V2", "0", 1);
  const std::string v1_128 = runtime::kernel_source_sm90_bwd(gen, key);
  EXPECT_NE(v1_128.find("attn_bwd_sm90<FlexVariant, bf16, 128, 128, true>(p)"), std::string::npos) << v1_128;
  EXPECT_FALSE(runtime::sm90_bwd_source_choice(v1_128).dq_tma);
  unsetenv("FLEXATTN_SM90_BWD_V2");
  unsetenv("FLEXATTN_SM90_BWD_V3");
  EXPECT_EQ(runtime::kernel_source_sm90_bwd(gen, key), v3) << "unset = on";
  EXPECT_EQ(runtime::kernel_source_sm90_bwd(gen, k64), v3_64) << "unset = on";
  for (int dv : {64, 128}) {
    // v2 with v3's tiles: two unpadded buffers right where the small regions began (after the dS^T tiles, 1024-
    // aligned), lse / delta / barriers / info after them, then the dQ barriers and info slots.
    const kern::Sm90BwdSmem a = kern::sm90_bwd_smem_layout(128, dv, true, true),
                            b = kern::sm90_bwd_smem_layout(128, dv, true, true, true);
    EXPECT_EQ(b.dq, a.lse);
    EXPECT_EQ(b.dq % 1024, 0);
    EXPECT_EQ(b.dq_buf, 64 * 128 * 4);
    EXPECT_EQ(b.lse, b.dq + 2 * b.dq_buf);
    EXPECT_EQ(b.info - b.lse, a.info - a.lse);
    EXPECT_EQ(b.dq_bars, b.info + 16 * 2);
    EXPECT_EQ(b.dq_info, b.dq_bars + 8 * 2 * 2);
    // Then deterministic mode's rank ring (4 slots of 16 bytes, a full and an empty barrier each; session 33), in the
    // layouts with the TMA dQ path and two buffers only.
    EXPECT_EQ(b.dq_rank, b.dq_info + 8 * 2);
    EXPECT_EQ(b.total, b.dq_rank + kern::kSm90BwdRankRingBytes);
    EXPECT_EQ(kern::kSm90BwdRankRingBytes, 4 * 16 + 2 * 4 * 8);
    EXPECT_EQ(a.dq_rank, 0);
    EXPECT_EQ(a.total, a.dq_info + 8 * 1);
    EXPECT_LE(kern::sm90_bwd_smem(128, dv, true, true, true) + kern::kSm90BwdPersistentSmem, kern::kSm90SmemLimit);
    EXPECT_EQ(kern::sm90_bwd_launch(128, dv, 1, 8, 1000, true, true, true).smem,
              unsigned(kern::sm90_bwd_smem(128, dv, true, true, true)));
    // The first kernel at D = 64: two [2][64][32] fp32 buffers (16 KiB each), 1024-aligned, smaller than
    // the two padded ones (64 rows x 288 bytes).
    const kern::Sm90BwdSmem f = kern::sm90_bwd_smem_layout(64, dv, true),
                            g = kern::sm90_bwd_smem_layout(64, dv, true, false, true);
    EXPECT_EQ(f.info, g.info);
    EXPECT_EQ(g.dq % 1024, 0);
    EXPECT_EQ(g.dq_buf, 64 * 64 * 4);
    EXPECT_EQ(g.dq_bars, g.dq + kern::kSm90BwdDqBuffers * g.dq_buf);
    EXPECT_LE(g.total, f.total);
    EXPECT_EQ(kern::sm90_bwd_launch(64, dv, 1, 8, 1000, true, false, true).smem,
              unsigned(kern::sm90_bwd_smem(64, dv, true, false, true)));
  }
}

// FLEXATTN_SM90_BWD_PERSISTENT (opt-in): off unless set, parsed like the other switches, and it only
// appends kPersistent = true (with the dQ arguments spelled out) to the main kernel's template.
TEST(Sm90BwdHost, PersistentIsOptInAndOnlyAddsTheEighthTemplateArgument) {
  unsetenv("FLEXATTN_SM90_BWD_PERSISTENT");
  EXPECT_FALSE(runtime::sm90_bwd_persistent_requested());
  setenv("FLEXATTN_SM90_BWD_PERSISTENT", "0", 1);
  EXPECT_FALSE(runtime::sm90_bwd_persistent_requested());
  setenv("FLEXATTN_SM90_BWD_PERSISTENT", "1", 1);
  EXPECT_TRUE(runtime::sm90_bwd_persistent_requested());
  unsetenv("FLEXATTN_SM90_BWD_PERSISTENT");
  EXPECT_EQ(runtime::sm90_bwd_persistent_args(""), ", false, false, false, true");
  EXPECT_EQ(runtime::sm90_bwd_persistent_args(", true"), ", true, false, false, true");
  EXPECT_EQ(runtime::sm90_bwd_persistent_args(", false, true"), ", false, true, false, true");
  EXPECT_EQ(runtime::sm90_bwd_persistent_args(", true, true"), ", true, true, false, true");
  EXPECT_EQ(runtime::sm90_bwd_persistent_args(", true, false, true"), ", true, false, true, true");
  EXPECT_EQ(runtime::sm90_bwd_persistent_args(", true, true, true"), ", true, true, true, true");

  Variant v;
  v.mask_mod = mods::causal();
  const codegen::GeneratedVariant gen = codegen::emit_cuda_variant(v, true);
  runtime::KernelSetKey key{DType::BF16, 128, 128, "sm_90a", true, runtime::KernelFamily::sm90};
  runtime::KernelSetKey k64{DType::BF16, 64, 64, "sm_90a", true, runtime::KernelFamily::sm90};
  const std::string d128 = runtime::kernel_source_sm90_bwd(gen, key), d64 = runtime::kernel_source_sm90_bwd(gen, k64);
  const std::string d128_red = runtime::kernel_source_sm90_bwd(gen, key, 0);
  EXPECT_FALSE(runtime::sm90_bwd_source_choice(d128).persistent);
  setenv("FLEXATTN_SM90_BWD_PERSISTENT", "1", 1);
  // The persistent kernel has no grouped launch order (FLEXATTN_SM90_BWD_HEAD_GROUPS) and no TMA-store epilogue
  // (FLEXATTN_SM90_BWD_TMA_STORE), the default's defines, nor the grouped order's deferral entry
  // (flexattn_bwd_cta_order, the source's last two lines).
  // (The v2's per-element path has no TMA-store define to begin with: tma = false.)
  auto with = [](std::string src, const std::string& call, const std::string& by, bool tma = true) {
    const size_t order_entry = src.find("extern \"C\" __global__ void __launch_bounds__(kSm90BwdOrderThreads, 1)");
    EXPECT_NE(order_entry, std::string::npos);
    if (order_entry != std::string::npos) src.erase(order_entry);
    for (const std::string define_line : {"#define FLEXATTN_SM90_BWD_GRID_ORDER 1\n", "#define FLEXATTN_SM90_BWD_TMA_STORE 1\n"}) {
      const size_t define = src.find(define_line);
      if (!tma && define_line.find("TMA_STORE") != std::string::npos) {
        EXPECT_EQ(define, std::string::npos) << define_line;
        continue;
      }
      EXPECT_NE(define, std::string::npos) << define_line;
      if (define != std::string::npos) src.erase(define, define_line.size());
    }
    const size_t at = src.find(call);
    EXPECT_NE(at, std::string::npos) << call;
    if (at != std::string::npos) src.replace(at, call.size(), by);
    return src;
  };
  // The defaults: v2 + v3 at D = 128, the first kernel + v3 at D = 64.
  const std::string p128 = runtime::kernel_source_sm90_bwd(gen, key);
  EXPECT_EQ(p128, with(d128, "128, 128, true, true, true>(p)", "128, 128, true, true, true, true>(p)"));
  const runtime::Sm90BwdChoice c = runtime::sm90_bwd_source_choice(p128);
  EXPECT_TRUE(c.dq_bulk && c.v2 && c.dq_tma && c.persistent);
  const std::string p64 = runtime::kernel_source_sm90_bwd(gen, k64);
  EXPECT_EQ(p64, with(d64, "64, 64, true, false, true>(p)", "64, 64, true, false, true, true>(p)"));
  const runtime::Sm90BwdChoice c64 = runtime::sm90_bwd_source_choice(p64);
  EXPECT_TRUE(c64.dq_bulk && !c64.v2 && c64.dq_tma && c64.persistent);
  // The spill fallback's per-element dQ path (v2 without bulk) keeps the switch.
  const std::string p128_red = runtime::kernel_source_sm90_bwd(gen, key, 0);
  EXPECT_EQ(p128_red, with(d128_red, "128, 128, false, true>(p)", "128, 128, false, true, false, true>(p)", false));
  const runtime::Sm90BwdChoice cr = runtime::sm90_bwd_source_choice(p128_red);
  EXPECT_TRUE(!cr.dq_bulk && cr.v2 && !cr.dq_tma && cr.persistent);
  // The spill fallback of kernel_set.cc asks for the default kernel explicitly, whatever the switch says.
  EXPECT_EQ(runtime::kernel_source_sm90_bwd(gen, key, -1, -1, 0), d128);
  EXPECT_EQ(runtime::kernel_source_sm90_bwd(gen, key, 0, -1, 0), d128_red);
  unsetenv("FLEXATTN_SM90_BWD_PERSISTENT");
  EXPECT_EQ(runtime::kernel_source_sm90_bwd(gen, key), d128) << "unset = the default source, byte for byte";
  EXPECT_EQ(runtime::kernel_source_sm90_bwd(gen, key, -1, -1, 1), p128);
}

// The v3 dQ slabs' 8-byte stores (DqSlots): a half-warp (rows g = 4h .. 4h + 3, t = 0..3) is served in one wavefront
// only if its 16 lanes' 8-byte words cover 32 distinct banks. In step order (rows 128 bytes apart, the 128B swizzle)
// rows g and g ^ 1 share a chunk pair: 16 banks, 2 wavefronts (ncu, H100, session 29). The swapped order covers 32,
// and still stores every lane's four blocks exactly once, each at its own chunk.
TEST(Sm90BwdHost, DqV3StoreOrderKeepsEachHalfWarpOnDistinctBanks) {
  for (bool swap : {false, true}) {
    for (int i = 0; i < 4; ++i) {
      for (int h = 0; h < 2; ++h) {
        std::set<int> banks;
        for (int g = 4 * h; g < 4 * h + 4; ++g)
          for (int t = 0; t < 4; ++t) {
            const int chunk = kern::sm90_dq_v3_chunk(i, t, kern::sm90_dq_v3_chunk_xor(g, swap));
            EXPECT_EQ(chunk, kern::sm90_dq_v3_chunk(kern::sm90_dq_v3_step_block(i, g, swap), t, g));
            for (int w = 0; w < 2; ++w) banks.insert((16 * chunk + 8 * (t & 1) + 4 * w) / 4 % 32);
          }
        EXPECT_EQ(banks.size(), swap ? 32u : 16u) << "step " << i << " half-warp " << h;
      }
    }
    for (int g = 0; g < 8; ++g) {
      std::set<int> blocks;
      for (int i = 0; i < 4; ++i) blocks.insert(kern::sm90_dq_v3_step_block(i, g, swap));
      EXPECT_EQ(blocks.size(), 4u) << g;
    }
  }
}

// Padded backward head dims: the kernel's dim per call dim, and the workspace's accumulator at the kernel's dim
// (the sm90 backward's dQ map covers [B * Hq, L, kernel D]), whichever family then runs.
TEST(Sm90BwdHost, PaddedHeadDimsAndTheirAccumulator) {
  unsetenv("FLEXATTN_SM90_PAD_HEAD_DIM");
  setenv("FLEXATTN_SM90_BWD_PAD_HEAD_DIM", "0", 1);
  EXPECT_EQ(runtime::sm90_bwd_head_dim(96), 0);
  EXPECT_EQ(runtime::sm90_bwd_head_dim(128), 128);
  unsetenv("FLEXATTN_SM90_BWD_PAD_HEAD_DIM");  // the default: padded
  const int want[][2] = {{64, 64}, {128, 128}, {256, 256}, {80, 128}, {96, 128}, {112, 128},
                         {144, 256}, {192, 256}, {240, 256}, {32, 0}, {48, 0}, {72, 0}, {100, 0}, {320, 0}};
  for (const auto& w : want) {
    EXPECT_EQ(kern::sm90_bwd_padded_head_dim(w[0]), w[1]) << w[0];
    EXPECT_EQ(runtime::sm90_bwd_head_dim(w[0]), w[1]) << w[0];
  }
  const runtime::BackwardWorkspace padded = runtime::backward_workspace(2, 3, 100, 96, false);
  EXPECT_EQ(padded.accum, 256u * ((2 * 3 * 100 * 4 + 255) / 256));
  EXPECT_GE(padded.claim, padded.accum + size_t(2 * 3 * 100 * 128) * 4);
  EXPECT_GE(runtime::backward_workspace(2, 3, 100, 192, false).claim, padded.accum + size_t(2 * 3 * 100 * 256) * 4);
  setenv("FLEXATTN_SM90_PAD_HEAD_DIM", "0", 1);
  EXPECT_EQ(runtime::sm90_bwd_head_dim(96), 0);
  EXPECT_EQ(runtime::sm90_bwd_head_dim(128), 128);
  const runtime::BackwardWorkspace exact = runtime::backward_workspace(2, 3, 100, 96, false);
  EXPECT_EQ(exact.claim, (exact.accum + size_t(2 * 3 * 100 * 96) * 4 + 255) / 256 * 256);
  unsetenv("FLEXATTN_SM90_PAD_HEAD_DIM");
  unsetenv("FLEXATTN_SM90_BWD_PAD_HEAD_DIM");
}

// The one key try_sm90_backward, compile_variant and the GPU check's prewarm share: the kernel's dims, non-persistent
// when padded, and no key (a decline before compiling) for a deterministic call padded onto the wide kernel.
TEST(Sm90BwdHost, CallKeyPadsAndDeclinesTheDeterministicWideCall) {
  unsetenv("FLEXATTN_SM90_BWD_PAD_HEAD_DIM");
  const auto wide = runtime::sm90_bwd_call_key(DType::BF16, 192, 192, "sm_90a", false, true);
  ASSERT_TRUE(wide.has_value());
  EXPECT_EQ(wide->d, 256);
  EXPECT_EQ(wide->dv, 256);
  EXPECT_EQ(wide->sm90_bwd_persistent, 0);
  EXPECT_FALSE(runtime::sm90_bwd_call_key(DType::BF16, 192, 192, "sm_90a", true, true).has_value());
  const auto d96 = runtime::sm90_bwd_call_key(DType::F16, 96, 64, "sm_90a", true, false);
  ASSERT_TRUE(d96.has_value());
  EXPECT_EQ(d96->d, 128);
  EXPECT_EQ(d96->dv, 64);
  EXPECT_EQ(d96->sm90_bwd_persistent, 0);
  EXPECT_EQ(d96->sm90_bwd_grid_order, runtime::sm90_bwd_grid_order_for_call(true, false));
  const auto exact = runtime::sm90_bwd_call_key(DType::BF16, 64, 64, "sm_90a", false, true);
  ASSERT_TRUE(exact.has_value());
  EXPECT_EQ(exact->d, 64);
  EXPECT_EQ(exact->sm90_bwd_persistent, runtime::sm90_bwd_persistent_for_call(64, 64, false));
  EXPECT_EQ(exact->family, runtime::KernelFamily::sm90);
  unsetenv("FLEXATTN_SM90_BWD_PAD_HEAD_DIM");
}
