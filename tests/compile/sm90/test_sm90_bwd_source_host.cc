// Host side of the sm90 backward, no GPU or NVRTC needed: which source a kernel set compiles -- the switches that
// reach it through the key or the environment (grouped launch order, persistent kernel) and get_kernel_set's list
// of spill fallbacks (sm90_bwd_fallback_sources). The tile table, launch and maps: test_sm90_bwd_host.cc.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/params.h"
#include "flexattn/codegen.h"
#include "flexattn/mods.h"
#include "runtime/kernel_set.h"
#include "runtime/sm90_backward.h"
#include "sm90/fwd_scheduler_sm90.cuh"
#include "sm90/tile_config_sm90_bwd.h"
#include "compile/sm90/sm90_host_util.h"

using namespace flexattn;

using sm90_test::eligible_params;
using sm90_test::error_of;

// FLEXATTN_SM90_BWD_HEAD_GROUPS: by default the grouped launch order is compiled into the non-persistent kernel of
// a variant with a mask_mod and used for its calls with a block mask or in deterministic mode (measured faster
// there, session 10); `1` compiles and uses it always, `0` never.
TEST(Sm90BwdHost, HeadGroupsByDefaultForMaskedAndDeterministicCalls) {
  Variant v;
  v.mask_mod = mods::causal();
  const codegen::GeneratedVariant gen = codegen::emit_cuda_variant(v, true);
  const runtime::KernelSetKey key{DType::BF16, 128, 128, "sm_90a", true, runtime::KernelFamily::sm90};
  const std::string define = "#define FLEXATTN_SM90_BWD_GRID_ORDER 1";
  kern::AttnParams p = eligible_params();
  p.B = 2, p.Hq = p.Hkv = 16, p.Bkv = 2, p.L = p.S = 8192;
  const int32_t mask_word = 0;
  kern::AttnParams masked = p;
  masked.kv_num_blocks = &mask_word;
  const int group = kern::sm90_bwd_head_group(2, 16, 16, 2, 8192, 8192, 128, 128);
  ASSERT_EQ(group, 2);

  for (const char* unset_or_auto : {"", "auto"}) {
    if (*unset_or_auto) setenv("FLEXATTN_SM90_BWD_HEAD_GROUPS", unset_or_auto, 1);
    else unsetenv("FLEXATTN_SM90_BWD_HEAD_GROUPS");
    EXPECT_EQ(runtime::sm90_bwd_head_groups_mode(), runtime::Sm90BwdHeadGroups::automatic);
    const std::string src = runtime::kernel_source_sm90_bwd(gen, key);
    EXPECT_NE(src.find(define), std::string::npos) << unset_or_auto;
    EXPECT_TRUE(runtime::sm90_bwd_source_choice(src).grid_order);
    EXPECT_EQ(runtime::sm90_bwd_launch_head_group(masked, false, true), group);
    EXPECT_EQ(runtime::sm90_bwd_launch_head_group(p, true, true), group);  // deterministic, no mask
    EXPECT_EQ(runtime::sm90_bwd_launch_head_group(p, false, true), 1);     // dense, no mask
    EXPECT_EQ(runtime::sm90_bwd_launch_head_group(masked, true, false), 1);  // not compiled in (fell back)
  }
  // A variant without a mask_mod keeps the grid's own order (the order compiled in cost it ~3 %).
  Variant dense;
  dense.score_mod = mods::softcap(20);
  const codegen::GeneratedVariant dense_gen = codegen::emit_cuda_variant(dense, true);
  EXPECT_FALSE(dense_gen.has_mask_mod);
  EXPECT_TRUE(gen.has_mask_mod);
  EXPECT_EQ(runtime::kernel_source_sm90_bwd(dense_gen, key).find(define), std::string::npos);
  // ... except in deterministic mode, where the order paid for the dense kernel too: its calls ask for it.
  EXPECT_EQ(runtime::sm90_bwd_grid_order_for_call(true, false), 1);
  EXPECT_EQ(runtime::sm90_bwd_grid_order_for_call(false, false), -1);
  // A masked variant has it compiled in by the rule: its deterministic calls share the default set.
  EXPECT_EQ(runtime::sm90_bwd_grid_order_for_call(true, true), -1);
  runtime::KernelSetKey det_key = key;
  det_key.sm90_bwd_grid_order = runtime::sm90_bwd_grid_order_for_call(true, false);
  EXPECT_NE(runtime::kernel_source_sm90_bwd(dense_gen, det_key).find(define), std::string::npos);
  EXPECT_EQ(runtime::sm90_bwd_launch_head_group(p, true, true), group);
  // The persistent kernel has its own tile queue order; an explicit 0 leaves the define out.
  EXPECT_EQ(runtime::kernel_source_sm90_bwd(gen, key, -1, -1, 1).find(define), std::string::npos);
  EXPECT_EQ(runtime::kernel_source_sm90_bwd(gen, key, -1, -1, -1, 0).find(define), std::string::npos);

  setenv("FLEXATTN_SM90_BWD_HEAD_GROUPS", "1", 1);
  EXPECT_EQ(runtime::sm90_bwd_head_groups_mode(), runtime::Sm90BwdHeadGroups::always);
  EXPECT_EQ(runtime::sm90_bwd_launch_head_group(p, false, true), group);
  EXPECT_NE(runtime::kernel_source_sm90_bwd(dense_gen, key).find(define), std::string::npos);
  setenv("FLEXATTN_SM90_BWD_HEAD_GROUPS", "off", 1);
  EXPECT_EQ(runtime::sm90_bwd_head_groups_mode(), runtime::Sm90BwdHeadGroups::off);
  setenv("FLEXATTN_SM90_BWD_HEAD_GROUPS", "grouped", 1);
  EXPECT_EQ(error_of([] { runtime::sm90_bwd_head_groups_mode(); }),
            "FLEXATTN_SM90_BWD_HEAD_GROUPS: expected auto, 0 or 1, got 'grouped'");

  setenv("FLEXATTN_SM90_BWD_HEAD_GROUPS", "0", 1);
  EXPECT_EQ(runtime::sm90_bwd_head_groups_mode(), runtime::Sm90BwdHeadGroups::off);
  const std::string off = runtime::kernel_source_sm90_bwd(gen, key);
  EXPECT_EQ(off.find(define), std::string::npos);
  EXPECT_FALSE(runtime::sm90_bwd_source_choice(off).grid_order);
  EXPECT_EQ(runtime::sm90_bwd_launch_head_group(masked, true, true), 1);
  EXPECT_EQ(runtime::sm90_bwd_grid_order_for_call(true, false), -1);
  unsetenv("FLEXATTN_SM90_BWD_HEAD_GROUPS");
}

// FLEXATTN_SM90_BWD_PERSISTENT=auto (opt-in): the persistent kernel per call for D = Dv = 64 outside deterministic
// mode, as a kernel set of its own (KernelSetKey::sm90_bwd_persistent reaches the source); unset / 0 / 1: the
// switch as read when the set is built (-1).
TEST(Sm90BwdHost, PersistentAutoPicksPerCallAndTheKeyReachesTheSource) {
  unsetenv("FLEXATTN_SM90_BWD_PERSISTENT");
  EXPECT_EQ(runtime::sm90_bwd_persistent_for_call(64, 64, false), -1);
  setenv("FLEXATTN_SM90_BWD_PERSISTENT", "1", 1);
  EXPECT_EQ(runtime::sm90_bwd_persistent_for_call(64, 64, false), -1);
  setenv("FLEXATTN_SM90_BWD_PERSISTENT", "auto", 1);
  EXPECT_FALSE(runtime::sm90_bwd_persistent_requested());  // a set built without a per-call choice: the default
  EXPECT_EQ(runtime::sm90_bwd_persistent_for_call(64, 64, false), 1);
  EXPECT_EQ(runtime::sm90_bwd_persistent_for_call(64, 64, true), 0);
  EXPECT_EQ(runtime::sm90_bwd_persistent_for_call(128, 128, false), 0);
  EXPECT_EQ(runtime::sm90_bwd_persistent_for_call(64, 128, false), 0);
  Variant v;
  v.mask_mod = mods::causal();
  v.score_mod = mods::alibi("H");
  const codegen::GeneratedVariant gen = codegen::emit_cuda_variant(v, true);
  runtime::KernelSetKey key{DType::BF16, 64, 64, "sm_90a", true, runtime::KernelFamily::sm90};
  key.sm90_bwd_persistent = 1;
  const std::string persistent = runtime::kernel_source_sm90_bwd(gen, key);
  EXPECT_TRUE(runtime::sm90_bwd_source_choice(persistent).persistent);
  // ALiBi's affine backward stays in the persistent kernel at D = 64 (it spilled only at D = 128).
  EXPECT_NE(persistent.find("#define FLEXATTN_SM90_REL_AFFINE 1"), std::string::npos);
  key.sm90_bwd_persistent = 0;
  EXPECT_FALSE(runtime::sm90_bwd_source_choice(runtime::kernel_source_sm90_bwd(gen, key)).persistent);
  runtime::KernelSetKey k128{DType::BF16, 128, 128, "sm_90a", true, runtime::KernelFamily::sm90};
  k128.sm90_bwd_persistent = 1;
  EXPECT_EQ(runtime::kernel_source_sm90_bwd(gen, k128).find("#define FLEXATTN_SM90_REL_AFFINE 1"), std::string::npos);
  k128.sm90_bwd_persistent = 0;
  EXPECT_NE(runtime::kernel_source_sm90_bwd(gen, k128).find("#define FLEXATTN_SM90_REL_AFFINE 1"), std::string::npos);
  unsetenv("FLEXATTN_SM90_BWD_PERSISTENT");
}

// get_kernel_set's spill fallbacks as a list of sources (sm90_bwd_fallback_sources): each step gives up one thing
// of the source before it, in the order the walk takes them, and no source repeats the one before.
TEST(Sm90BwdHost, FallbackSourcesGiveUpOneThingAtATime) {
  for (const char* v : {"FLEXATTN_SM90_BWD_HEAD_GROUPS", "FLEXATTN_SM90_BWD_BG_REDUCE", "FLEXATTN_SM90_BWD_TMA_STORE",
                        "FLEXATTN_SM90_BWD_DQ_BULK", "FLEXATTN_SM90_BWD_PERSISTENT", "FLEXATTN_SM90_BWD_V2",
                        "FLEXATTN_SM90_BWD_RANK_WARP"})
    unsetenv(v);
  const runtime::KernelSetKey key{DType::BF16, 128, 128, "sm_90a", true, runtime::KernelFamily::sm90};
  const std::string bg_define = "#define FLEXATTN_SM90_BWD_BG_REDUCE 1";
  auto choice = [](const std::string& s) { return runtime::sm90_bwd_source_choice(s); };
  // A learnable relative bias with a causal mask: per-diagonal buffer-gradient sums (the class whose first source
  // spills at D = 128, so get_kernel_set compiles its next candidates beside it).
  const mods::ModSpec relbias = mods::lookup_score("relbias");
  ASSERT_EQ(relbias.buffers.size(), 1u);
  Variant learnable;
  learnable.score_mod = relbias.expr;
  learnable.mask_mod = mods::causal();
  learnable.grad_buffers = {relbias.buffers[0].name};
  const codegen::GeneratedVariant gen = codegen::emit_cuda_variant(learnable, true);
  ASSERT_EQ(gen.buffer_grad_reduce, 2);
  ASSERT_TRUE(gen.has_mask_mod);
  const std::string first = runtime::kernel_source_sm90_bwd(gen, key);
  const std::vector<std::string> path = runtime::sm90_bwd_fallback_sources(gen, key, first);
  ASSERT_EQ(path.size(), 6u);
  EXPECT_EQ(path[0], first);
  // 0: bulk dQ, the sums, the grouped order, the rank warp (the TMA-store epilogue is inert beside the sums: not in
  // the source).
  EXPECT_TRUE(choice(path[0]).dq_bulk && choice(path[0]).grid_order && !choice(path[0]).tma_store);
  EXPECT_TRUE(choice(path[0]).rank_warp);
  EXPECT_NE(path[0].find(bg_define), std::string::npos);
  // 1: without the rank warp, and so on from there.
  EXPECT_TRUE(choice(path[1]).dq_bulk && choice(path[1]).grid_order && !choice(path[1]).rank_warp);
  EXPECT_NE(path[1].find(bg_define), std::string::npos);
  // 2: without the grouped order.
  EXPECT_TRUE(choice(path[2]).dq_bulk && !choice(path[2]).grid_order);
  EXPECT_NE(path[2].find(bg_define), std::string::npos);
  // 3: without the sums, bulk dQ kept (the TMA-store epilogue now applies again); 4: per-element dQ with the sums;
  // 5: per-element dQ without them.
  EXPECT_TRUE(choice(path[3]).dq_bulk && !choice(path[3]).grid_order && !choice(path[3]).rank_warp);
  EXPECT_EQ(path[3].find(bg_define), std::string::npos);
  EXPECT_TRUE(!choice(path[4]).dq_bulk && !choice(path[4]).grid_order);
  EXPECT_NE(path[4].find(bg_define), std::string::npos);
  EXPECT_TRUE(!choice(path[5]).dq_bulk && !choice(path[5]).grid_order);
  EXPECT_EQ(path[5].find(bg_define), std::string::npos);
  for (size_t i = 1; i < path.size(); ++i) EXPECT_NE(path[i], path[i - 1]) << i;
  for (const std::string& src : path) EXPECT_FALSE(choice(src).rank_warp && src != first);

  // A causal mask alone: the rank warp goes first, then the TMA-store epilogue, the grouped order, bulk dQ.
  Variant causal;
  causal.mask_mod = mods::causal();
  const codegen::GeneratedVariant cgen = codegen::emit_cuda_variant(causal, true);
  const std::vector<std::string> cpath =
      runtime::sm90_bwd_fallback_sources(cgen, key, runtime::kernel_source_sm90_bwd(cgen, key));
  ASSERT_EQ(cpath.size(), 5u);
  EXPECT_TRUE(choice(cpath[0]).tma_store && choice(cpath[0]).grid_order && choice(cpath[0]).dq_bulk &&
              choice(cpath[0]).rank_warp);
  EXPECT_TRUE(choice(cpath[1]).tma_store && choice(cpath[1]).grid_order && choice(cpath[1]).dq_bulk &&
              !choice(cpath[1]).rank_warp);
  EXPECT_TRUE(!choice(cpath[2]).tma_store && choice(cpath[2]).grid_order && choice(cpath[2]).dq_bulk);
  EXPECT_TRUE(!choice(cpath[3]).tma_store && !choice(cpath[3]).grid_order && choice(cpath[3]).dq_bulk);
  EXPECT_TRUE(!choice(cpath[4]).tma_store && !choice(cpath[4]).grid_order && !choice(cpath[4]).dq_bulk);
  for (size_t i = 2; i < cpath.size(); ++i) EXPECT_FALSE(choice(cpath[i]).rank_warp) << i;

  // FLEXATTN_SM90_BWD_RANK_WARP=0 compiles it out; only kernels with the rank ring carry the define (the persistent,
  // wide and per-element ones stay byte-identical).
  setenv("FLEXATTN_SM90_BWD_RANK_WARP", "0", 1);
  EXPECT_FALSE(choice(runtime::kernel_source_sm90_bwd(cgen, key)).rank_warp);
  EXPECT_NE(runtime::kernel_source_sm90_bwd(cgen, key).find("FLEXATTN_SM90_BWD_NO_RANK_WARP"), std::string::npos);
  const runtime::KernelSetKey wkey{DType::BF16, 256, 256, "sm_90a", true, runtime::KernelFamily::sm90};
  const std::string wide_off = runtime::kernel_source_sm90_bwd(cgen, wkey);
  EXPECT_EQ(wide_off.find("RANK_WARP"), std::string::npos);
  EXPECT_EQ(runtime::kernel_source_sm90_bwd(cgen, key, 0).find("RANK_WARP"), std::string::npos);  // per-element dQ
  unsetenv("FLEXATTN_SM90_BWD_RANK_WARP");
  EXPECT_EQ(runtime::kernel_source_sm90_bwd(cgen, wkey), wide_off);
  EXPECT_FALSE(choice(wide_off).rank_warp);

  // The persistent kernel (a key that asks for it) first gives up its tile loop, keeping the rest; the grouped
  // order and the TMA-store epilogue, which only the default kernel compiles in, then come back with it.
  runtime::KernelSetKey pkey = key;
  pkey.sm90_bwd_persistent = 1;
  const std::vector<std::string> ppath =
      runtime::sm90_bwd_fallback_sources(cgen, pkey, runtime::kernel_source_sm90_bwd(cgen, pkey));
  ASSERT_GE(ppath.size(), 3u);
  EXPECT_TRUE(choice(ppath[0]).persistent && !choice(ppath[0]).grid_order && !choice(ppath[0]).tma_store);
  EXPECT_FALSE(choice(ppath[0]).rank_warp);
  EXPECT_FALSE(choice(ppath[1]).persistent);
  EXPECT_TRUE(choice(ppath[1]).rank_warp);
  EXPECT_FALSE(choice(ppath[2]).rank_warp);
  EXPECT_TRUE(choice(ppath[1]).dq_bulk && choice(ppath[1]).grid_order && choice(ppath[1]).tma_store);
  EXPECT_EQ(ppath[1], runtime::kernel_source_sm90_bwd(cgen, key));
}

// FLEXATTN_SM90_BWD_DQ_CLAIM (default on since session 31, off in deterministic mode since session 32; `1` turns it on
// there too) and its MAX_KV limit, read at each backward call; a limit that is not a number in range is an error
// naming the variable.
TEST(Sm90BwdHost, DqClaimOnByDefaultAndItsLimitIsChecked) {
  unsetenv("FLEXATTN_SM90_BWD_DQ_CLAIM");
  unsetenv("FLEXATTN_SM90_BWD_DQ_CLAIM_MAX_KV");
  EXPECT_TRUE(runtime::sm90_bwd_dq_claim_requested(false));
  EXPECT_FALSE(runtime::sm90_bwd_dq_claim_requested(true));
  EXPECT_EQ(runtime::sm90_bwd_dq_claim_max_kv(), runtime::kSm90BwdDqClaimMaxKv);
  setenv("FLEXATTN_SM90_BWD_DQ_CLAIM", "1", 1);
  EXPECT_TRUE(runtime::sm90_bwd_dq_claim_requested(true));
  setenv("FLEXATTN_SM90_BWD_DQ_CLAIM", "0", 1);
  EXPECT_FALSE(runtime::sm90_bwd_dq_claim_requested(false));
  EXPECT_FALSE(runtime::sm90_bwd_dq_claim_requested(true));
  setenv("FLEXATTN_SM90_BWD_DQ_CLAIM_MAX_KV", "4096", 1);
  EXPECT_EQ(runtime::sm90_bwd_dq_claim_max_kv(), 4096);
  for (const char* bad : {"-1", "lots", "2e9"}) {
    setenv("FLEXATTN_SM90_BWD_DQ_CLAIM_MAX_KV", bad, 1);
    try {
      runtime::sm90_bwd_dq_claim_max_kv();
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("FLEXATTN_SM90_BWD_DQ_CLAIM_MAX_KV: expected a number in [0"),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string("got '") + bad + "'"), std::string::npos) << e.what();
    }
  }
  unsetenv("FLEXATTN_SM90_BWD_DQ_CLAIM");
  unsetenv("FLEXATTN_SM90_BWD_DQ_CLAIM_MAX_KV");
}
