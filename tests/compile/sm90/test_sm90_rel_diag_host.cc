// The index arithmetic of the sm90 forward's distance-bias tables (kernels/sm90/fwd_rel_diag_sm90.cuh), on the
// host: for every lane of a warp, every entry of its 16 x BN tile, tile positions with and without offsets, the
// value the kernel reads (table[from + offset] of scores_from_rel_row's g[j][e], as fwd_softmax_sm90.cuh picks it
// per entry) is the bias at that entry's own distance, every index stays inside the warp's table, and every pair
// the table is evaluated at lies in the tile's rectangle.
#include <gtest/gtest.h>

#include <string>
#include <cstdlib>
#include <vector>

#include "corpus.h"
#include "flexattn/codegen.h"
#include "runtime/kernel_set.h"
#include "runtime/tma_sm90.h"
#include "sm90/fwd_rel_diag_sm90.cuh"
#include "sm90/tile_config_sm90.h"

using namespace flexattn::kern;
using namespace flexattn::kern::sm90;

namespace {

void check_tile(int bn, int qs, int kvs) {
  const int n = bn + 15;
  ASSERT_LE(n, sm90_rel_diag_table_floats(bn));
  // The table as rel_diag_fill writes it, with the bias f(d) = d (distinct per distance) at each pair.
  std::vector<long long> table(size_t(sm90_rel_diag_table_floats(bn)), -1);
  for (int k = 0; k < n; ++k) {
    const RelDiagPair at = rel_diag_pair(k, bn, qs, kvs);
    ASSERT_GE(at.q, qs);
    ASSERT_LE(at.q, qs + 15);
    ASSERT_GE(at.kv, kvs);
    ASSERT_LE(at.kv, kvs + bn - 1);
    table[size_t(k)] = (long long)at.q - at.kv;
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int from = rel_diag_from(lane), t = lane & 3;
    const long long q0 = qs + (lane >> 2), q1 = q0 + 8;
    // g[j][e] as rel_diag_read fills it.
    std::vector<long long> g(size_t(2 * (bn / 8 + 1)));
    for (int j = 0; j <= bn / 8; ++j)
      for (int e = 0; e < 2; ++e) {
        const int idx = from + rel_diag_offset(bn, j, e);
        ASSERT_GE(idx, 0) << "lane " << lane << " j " << j;
        ASSERT_LT(idx, n) << "lane " << lane << " j " << j;
        g[size_t(2 * j + e)] = table[size_t(idx)];
      }
    // Entry (i, e): row e >> 1, column kvs + 8i + 2t + (e & 1); scores_from_rel_row takes g[i + 1][e] for row 0
    // and g[i][e - 2] for row 1.
    for (int i = 0; i < bn / 8; ++i)
      for (int e = 0; e < 4; ++e) {
        const long long kv = kvs + 8 * i + 2 * t + (e & 1), q = e < 2 ? q0 : q1;
        const long long got = e < 2 ? g[size_t(2 * (i + 1) + e)] : g[size_t(2 * i + e - 2)];
        ASSERT_EQ(got, q - kv) << "bn " << bn << " lane " << lane << " entry " << i << "," << e;
      }
  }
}

}  // namespace

TEST(Sm90RelDiag, EveryEntryReadsItsOwnDistanceInsideTheTable) {
  for (int bn : {64, 128})
    for (int qs : {0, 16, 1000, 8176})
      for (int kvs : {0, 128, 4096, 7 * 128 + 5}) check_tile(bn, qs, kvs);
}

// The tables sit after everything else of the layout (no other offset moves, the Q buffers stay as many), fit every
// tile, and only the layouts that ask for them have them (the launch of the others requests what it did).
TEST(Sm90RelDiag, TablesFitEveryForwardLayout) {
  for (int d : {64, 128, 192, 256})
    for (bool narrow : {false, true})
      for (bool persistent : {false, true})
        for (bool tall : {false, true}) {
          const std::string what = "d " + std::to_string(d) + " narrow " + std::to_string(narrow) + " persistent " +
                                   std::to_string(persistent) + " tall " + std::to_string(tall);
          const Sm90FwdTile t = sm90_fwd_tile(d, d, narrow, tall);
          const Sm90FwdSmem s = sm90_fwd_smem_layout(d, d, narrow, persistent, tall, true);
          const Sm90FwdSmem plain = sm90_fwd_smem_layout(d, d, narrow, persistent, tall);
          EXPECT_EQ(s.rel % 16, 0) << what;
          EXPECT_GE(s.rel, s.counts) << what;
          EXPECT_EQ(s.total - s.rel, t.warpgroups * 4 * sm90_rel_diag_table_floats(t.block_n) * 4) << what;
          EXPECT_LE(s.total + 1024, kSm90SmemLimit) << what;
          EXPECT_EQ(s.q_bufs, plain.q_bufs) << what;
          EXPECT_EQ(s.counts, plain.counts) << what;
          EXPECT_EQ(s.rel, plain.rel) << what;
          EXPECT_LE(plain.total, plain.rel) << what;
          EXPECT_GT(plain.total + 16, plain.rel) << what;
          EXPECT_EQ(sm90_fwd_launch(d, d, narrow, 2, 16, 8192, 132, persistent, tall, true).smem, unsigned(s.total + 1024))
              << what;
        }
}

// The form the forward's source and launch share (runtime::sm90_fwd_form): the tables only for distance-only biases,
// never for ALiBi's affine bias or a variant without one. Unset: T5 takes them, the relative-bias gather keeps its row
// gathers (faster on an H100, session 29); 1: both take them; 0: neither. The source gets the define exactly when the
// form has the tables.
TEST(Sm90RelDiag, TheFormTakesTheTablesOnlyWhenAskedAndApplicable) {
  flexattn::mods::ProblemShape shape{1, 4, 4, 256, 256, 128, 128, 1};
  flexattn::runtime::KernelSetKey key{flexattn::DType::BF16, 128, 128, "sm_90a", false,
                                      flexattn::runtime::KernelFamily::sm90};
  for (const char* name : {"t5", "relbias(learnable)", "relbias+causal", "alibi+causal", "causal", "full"}) {
    const flexattn::Variant v = flexattn::corpus::build_variant(flexattn::corpus::corpus_entry(name), shape).variant;
    const flexattn::codegen::GeneratedVariant gen = flexattn::codegen::emit_cuda_variant(v, false);
    const bool t5 = std::string(name).rfind("t5", 0) == 0;
    const bool applicable = t5 || std::string(name).rfind("relbias", 0) == 0;
    unsetenv("FLEXATTN_SM90_REL_DIAG");
    EXPECT_EQ(flexattn::runtime::sm90_fwd_form(gen, key).rel_diag, t5) << name << ": unset";
    setenv("FLEXATTN_SM90_REL_DIAG", "0", 1);
    EXPECT_FALSE(flexattn::runtime::sm90_fwd_form(gen, key).rel_diag) << name << ": 0";
    setenv("FLEXATTN_SM90_REL_DIAG", "1", 1);
    const flexattn::runtime::Sm90FwdForm f = flexattn::runtime::sm90_fwd_form(gen, key);
    const std::string src = flexattn::runtime::kernel_source_sm90_fwd(gen, key, f);
    unsetenv("FLEXATTN_SM90_REL_DIAG");
    EXPECT_EQ(f.rel_diag, applicable) << name;
    EXPECT_EQ(src.find("#define FLEXATTN_SM90_REL_DIAG 1") != std::string::npos, applicable) << name;
  }
}
