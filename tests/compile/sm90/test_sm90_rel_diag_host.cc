// The index arithmetic of the sm90 forward's distance-bias tables (kernels/sm90/fwd_rel_diag_sm90.cuh), on the
// host: for every lane of a warp, every entry of its 16 x BN tile, tile positions with and without offsets, the
// value the kernel reads (table[from + offset] of scores_from_rel_row's g[j][e], as fwd_softmax_sm90.cuh picks it
// per entry) is the bias at that entry's own distance, every index stays inside the warp's table, and every pair
// the table is evaluated at lies in the tile's rectangle.
#include <gtest/gtest.h>

#include <vector>

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

// The table sits after everything else of the layout (no other offset moves) and fits every tile.
TEST(Sm90RelDiag, TablesFitEveryForwardLayout) {
  for (int d : {64, 128, 192, 256})
    for (bool narrow : {false, true})
      for (bool persistent : {false, true})
        for (bool tall : {false, true}) {
          const Sm90FwdTile t = sm90_fwd_tile(d, d, narrow, tall);
          const Sm90FwdSmem s = sm90_fwd_smem_layout(d, d, narrow, persistent, tall);
          EXPECT_EQ(s.rel % 16, 0);
          EXPECT_GE(s.rel, s.counts);
          EXPECT_EQ(s.total - s.rel, t.warpgroups * 4 * sm90_rel_diag_table_floats(t.block_n) * 4);
          EXPECT_LE(s.total + 1024, kSm90SmemLimit) << "d " << d << " narrow " << narrow << " tall " << tall;
        }
}
