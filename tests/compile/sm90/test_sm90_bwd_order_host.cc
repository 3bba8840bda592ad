// Host side of the sm90 backward's launch orders, no GPU or NVRTC needed: the persistent kernel's grid and work tiles
// with its queue word, the grouped launch order of the non-persistent kernel (a permutation; the causal schedule it
// shortens), and the deferral of short CTAs (FLEXATTN_SM90_BWD_CTA_ORDER) with its workspace.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <vector>

#include "common/params.h"
#include "runtime/sm90_backward.h"
#include "sm90/bwd_cta_order_sm90.cuh"
#include "sm90/fwd_scheduler_sm90.cuh"
#include "sm90/tile_config_sm90_bwd.h"
#include "compile/sm90/sm90_host_util.h"

using namespace flexattn;

// Grid of the persistent backward: min(CTAs, work tiles), never 0, 1-D; its shared memory is the layout
// of the same dQ path plus the two persistent words.
TEST(Sm90BwdHost, PersistentGridIsMinOfCtasAndWorkTiles) {
  EXPECT_EQ(kern::sm90_bwd_work_tiles(2, 16, 8192), 64 * 16 * 2);
  EXPECT_EQ(kern::sm90_bwd_work_tiles(1, 8, 1000), 8 * 8);  // ceil(1000 / 128) kv tiles
  const kern::Sm90Launch big = kern::sm90_bwd_persistent_launch(128, 128, 2, 16, 8192, 132, true, true, true);
  EXPECT_EQ(big.grid_x, 132u);
  EXPECT_EQ(big.grid_y, 1u);
  EXPECT_EQ(big.grid_z, 1u);
  EXPECT_EQ(big.block, 384u);
  EXPECT_EQ(big.smem, unsigned(kern::sm90_bwd_smem(128, 128, true, true, true) + kern::kSm90BwdPersistentSmem));
  EXPECT_LE(big.smem, unsigned(kern::kSm90SmemLimit));
  EXPECT_EQ(kern::sm90_bwd_persistent_launch(64, 64, 1, 2, 300, 132, true, false, true).grid_x, 6u);  // 3 x 2 tiles
  EXPECT_EQ(kern::sm90_bwd_persistent_launch(64, 64, 1, 1, 0, 132).grid_x, 1u);
  for (int d : {64, 128})
    for (int dv : {64, 128})
      for (int bulk = 0; bulk < 2; ++bulk)
        for (int v2 = 0; v2 < 2; ++v2)
          for (int tma = 0; tma <= bulk; ++tma) {
            if (v2 && !kern::sm90_bwd_v2_head_dims_ok(d, dv)) continue;
            const kern::Sm90BwdSmem s = kern::sm90_bwd_smem_layout(d, dv, bulk, v2, tma);
            EXPECT_EQ(s.total % 8, 0) << "the kv_empty barrier after the layout is 8-byte aligned";
            EXPECT_LE(kern::sm90_bwd_persistent_launch(d, dv, 1, 1, 128, 1, bulk, v2, tma).smem,
                      unsigned(kern::kSm90SmemLimit));
          }
}

// The work-tile order covers every (kv tile, kv head, kv batch) once for every group size, kv tiles ascending inside
// each pair (longest first for causal-like masks) and, with one group of every pair, over the whole order (the order
// before session 28); with a group of G pairs the first G * n_kv tiles hold only G pairs (the L2 working set). The
// claim loop of the persistent producer (first tile blockIdx.x, then fwd_queue_next) hands each tile to exactly one
// CTA and leaves the queue word at 0, with and without a queue, for grids below and at the tile count.
TEST(Sm90BwdHost, PersistentWorkTilesAreCoveredOnceAndTheQueueWordResets) {
  for (auto [Bkv, Hkv, S] : {std::tuple{2, 16, 8192}, {1, 3, 1000}, {3, 1, 129}}) {
    const int count = kern::sm90_bwd_work_tiles(Bkv, Hkv, S), n_kv = (S + 127) / 128, hb = Hkv * Bkv;
    for (int group : {1, 2, 5, hb, hb + 3}) {
      std::set<std::tuple<int, int, int>> seen;
      std::map<int, int> last_kv0;  // per pair
      int last_kv0_all = 0;
      std::set<int> first_pairs;
      const int g = std::min(std::max(group, 1), hb), first = hb % g ? hb % g : g;  // the leftover group runs first
      for (int t = 0; t < count; ++t) {
        const kern::Sm90BwdWorkTile w = kern::sm90_bwd_work_tile(t, n_kv, Hkv, Bkv, group);
        ASSERT_TRUE(w.kv0 % 128 == 0 && w.kv0 < S && w.hk >= 0 && w.hk < Hkv && w.bz >= 0 && w.bz < Bkv)
            << "t " << t << " group " << group;
        const int pair = w.hk + Hkv * w.bz;
        if (last_kv0.count(pair)) {
          EXPECT_GT(w.kv0, last_kv0[pair]) << "t " << t << " group " << group;
        }
        last_kv0[pair] = w.kv0;
        if (group >= hb) {
          EXPECT_GE(w.kv0, last_kv0_all) << "t " << t;
        }
        last_kv0_all = w.kv0;
        if (t < first * n_kv) first_pairs.insert(pair);
        seen.insert({w.kv0, w.hk, w.bz});
      }
      EXPECT_EQ(int(seen.size()), count) << "group " << group;
      EXPECT_EQ(int(first_pairs.size()), first) << "group " << group;
    }
    for (int grid : {1, 5, count}) {
      for (bool queue : {false, true}) {
        unsigned word = 0;
        std::vector<int> taken(count, 0);
        // Round-robin CTAs, one claim each per round: any interleaving must give the same coverage.
        std::vector<int> cur(grid);
        for (int b = 0; b < grid; ++b) cur[b] = b;
        for (bool busy = true; busy;) {
          busy = false;
          for (int b = 0; b < grid; ++b) {
            if (cur[b] >= count) continue;
            ++taken[cur[b]];
            cur[b] = kern::sm90::fwd_queue_next_with(
                queue ? &word : nullptr, cur[b], count, grid, [](unsigned* q) { return (*q)++; },
                [](unsigned* q) { *q = 0; });
            busy = true;
          }
        }
        for (int t = 0; t < count; ++t) EXPECT_EQ(taken[t], 1) << "tile " << t << " grid " << grid;
        EXPECT_EQ(word, 0u) << "grid " << grid;
      }
    }
  }
}

// The non-persistent backward's launch order (sm90_bwd_grid_tile): every (kv rank, kv head, kv batch) once for
// any group size; group 1 is the grid's own order; inside a pair the ranks ascend with the linear index (what
// the deterministic mode's ordered dQ needs: a CTA waits only for lower ranks of its own pair).
TEST(Sm90BwdHost, GridTileOrderIsAPermutationWithRanksAscendingPerPair) {
  for (const auto& [n_kv, Hkv, Bkv] : {std::tuple{64, 16, 2}, std::tuple{7, 3, 5}, std::tuple{1, 1, 1}}) {
    for (int group : {0, 1, 2, 4, 6, 1000}) {
      std::vector<int> seen(size_t(n_kv * Hkv * Bkv), 0), last(size_t(Hkv * Bkv), -1);
      for (int linear = 0; linear < n_kv * Hkv * Bkv; ++linear) {
        const auto w = kern::sm90_bwd_grid_tile(linear, n_kv, Hkv, Bkv, group);
        ASSERT_GE(w.rank, 0);
        ASSERT_LT(w.rank, n_kv);
        ASSERT_LT(w.hk, Hkv);
        ASSERT_LT(w.bz, Bkv);
        const int pair = w.bz * Hkv + w.hk;
        ++seen[size_t(pair * n_kv + w.rank)];
        EXPECT_GT(w.rank, last[size_t(pair)]) << "group " << group << " linear " << linear;
        last[size_t(pair)] = w.rank;
        if (group <= 1) {
          EXPECT_EQ(w.rank, linear % n_kv);
          EXPECT_EQ(pair, linear / n_kv);
        }
      }
      for (int s : seen) ASSERT_EQ(s, 1) << "group " << group;
    }
  }
}

// Why: the greedy schedule (one CTA per SM, 132 SMs, CTAs taken in launch order) of causal backward CTAs (kv
// tile j walks n - j query tiles, plus one tile of fixed cost). Pair after pair leaves a tail; kv-tile-major
// inside the L2-sized groups reaches the bound at S=8192 and S=4096 (B=2 H=16 D=128: groups of 2 and 4).
TEST(Sm90BwdHost, GroupedGridOrderShortensTheCausalSchedule) {
  auto makespan = [](int n_kv, int pairs, int group) {
    std::priority_queue<double, std::vector<double>, std::greater<double>> free_at;
    for (int c = 0; c < 132; ++c) free_at.push(0.0);
    double end = 0.0;
    for (int linear = 0; linear < n_kv * pairs; ++linear) {
      const auto w = kern::sm90_bwd_grid_tile(linear, n_kv, pairs, 1, group);
      const double f = free_at.top() + (n_kv - w.rank) + 1.0;
      free_at.pop();
      free_at.push(f);
      end = std::max(end, f);
    }
    return end;
  };
  EXPECT_EQ(kern::sm90_bwd_head_group(2, 16, 16, 2, 8192, 8192, 128, 128), 2);
  EXPECT_EQ(kern::sm90_bwd_head_group(2, 16, 16, 2, 4096, 4096, 128, 128), 4);
  EXPECT_EQ(kern::sm90_bwd_head_group(2, 16, 16, 2, 1024, 1024, 64, 64), 32);  // capped at the pairs
  EXPECT_EQ(kern::sm90_bwd_head_group(2, 16, 16, 2, 1 << 20, 1 << 20, 128, 128), 1);
  EXPECT_EQ(kern::sm90_bwd_head_group(2, 16, 16, 1, 4096, 4096, 128, 128), 2);  // K / V broadcast: 2 batches per pair
  EXPECT_DOUBLE_EQ(makespan(64, 32, 1), 549.0);
  EXPECT_DOUBLE_EQ(makespan(64, 32, 2), 520.0);  // bound 519.8
  EXPECT_DOUBLE_EQ(makespan(32, 32, 1), 154.0);
  EXPECT_DOUBLE_EQ(makespan(32, 32, 4), 136.0);  // bound 135.8
}

// FLEXATTN_SM90_BWD_CTA_ORDER (kernels/sm90/bwd_cta_order_sm90.cuh): the order is a permutation of the launch; the
// identity where every pair's walks fall along its kv tiles (causal: the grouped order is longest first); otherwise
// the CTAs with walks of at least a quarter of the mean first, the others last, both in natural order. Walks: the
// transposed lists' block counts over the kv head's query heads and the batches the CTA serves.
TEST(Sm90BwdHost, CtaOrderDefersTheShortCtasOnlyWhereTheWalksRise) {
  auto run = [](const std::vector<int32_t>& cols, int Hq, int Hkv, int B, int Bkv, int group) {
    kern::AttnParams p{};
    const int nkv = int(cols.size());
    p.B = B, p.Hq = Hq, p.Hkv = Hkv, p.Bkv = Bkv, p.L = p.S = nkv * 128;
    p.q_block = p.kv_block = 128, p.nq = p.nkv = nkv, p.mask_B = p.mask_H = 1;
    p.q_num_blocks = cols.data();
    p.bwd_head_group = group;
    std::vector<int> order(size_t(nkv * Hkv * Bkv));
    kern::sm90::bwd_cta_order_reference(p, nkv, order.data());
    std::vector<long long> walks;
    for (int i = 0; i < int(order.size()); ++i) walks.push_back(kern::sm90::bwd_cta_walk(p, i, nkv));
    return std::pair{order, walks};
  };
  // Causal (column j attended by the rows at or after it): falling walks, the identity.
  const std::vector<int32_t> causal = {8, 7, 6, 5, 4, 3, 2, 1};
  for (const auto& [Hq, Hkv, B, Bkv, group] : {std::tuple{4, 4, 2, 2, 2}, std::tuple{8, 2, 2, 1, 1}}) {
    const auto [order, walks] = run(causal, Hq, Hkv, B, Bkv, group);
    for (int k = 0; k < int(order.size()); ++k) ASSERT_EQ(order[size_t(k)], k);
    // GQA 4 over Bkv = 1 and B = 2: each CTA walks its column for 4 heads x 2 batches, 2 query tiles per block.
    if (Hkv == 2) {
      EXPECT_EQ(walks[0], 8LL * 4 * 2 * 2);
    }
  }
  // Documents: walks rise inside the launch; the short ones (< a quarter of the mean) go last.
  const std::vector<int32_t> docs = {1, 6, 5, 4, 1, 9, 8, 1};
  const auto [order, walks] = run(docs, 4, 4, 2, 2, 2);
  std::vector<int> seen(order.size(), 0);
  for (int v : order) ++seen[size_t(v)];
  for (int c : seen) ASSERT_EQ(c, 1);
  double mean = 0;
  for (long long w : walks) mean += double(w) / double(walks.size());
  const double thr = 0.25 * mean;
  size_t k = 0;
  for (int i = 0; i < int(walks.size()); ++i) {
    if (double(walks[size_t(i)]) >= thr) {
      EXPECT_EQ(order[k++], i);
    }
  }
  const size_t n_long = k;
  for (int i = 0; i < int(walks.size()); ++i) {
    if (double(walks[size_t(i)]) < thr) {
      EXPECT_EQ(order[k++], i);
    }
  }
  EXPECT_EQ(k, order.size());
  EXPECT_LT(n_long, order.size());  // some deferred (the walks of 1 block: 2 tiles, mean 8.75)
  EXPECT_EQ(walks[0], 2);
}

// The order's workspace: two ints per main-kernel CTA after the backward's regions, 256-aligned.
TEST(Sm90BwdHost, CtaOrderWorkspaceFollowsTheBackwardRegions) {
  const runtime::BackwardWorkspace w = runtime::backward_workspace(2, 16, 1000, 128, false);
  EXPECT_EQ(runtime::bwd_cta_order_offset(w) % 256, 0u);
  EXPECT_GE(runtime::bwd_cta_order_offset(w), w.bytes);
  EXPECT_EQ(runtime::bwd_cta_order_bytes(1000, 4, 2), size_t(2 * 8 * 4 * 2 * 4));
}
