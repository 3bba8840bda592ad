// The warp-level diagonal reduction of the sm90 backward's buffer gradients (kernels/common/diag_reduce.cuh),
// run on the host: 32 threads stand for the lanes and a barrier-backed exchange for __shfl_sync. Every
// diagonal of the warp's 16 x 64 accumulator part must come out exactly once with the sum of its entries.
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "common/diag_reduce.cuh"

using namespace flexattn::kern;

namespace {

// A shuffle among 32 host threads: each lane publishes its value, waits for all, reads the source's.
struct HostWarp {
  std::barrier<> bar{32};
  float slot[32] = {};
};
struct HostShfl {
  HostWarp* w;
  int lane;
  float operator()(float v, int src) const {
    w->slot[lane] = v;
    w->bar.arrive_and_wait();
    const float r = w->slot[src];
    w->bar.arrive_and_wait();
    return r;
  }
};

// c[lane][4i + e]: the accumulator entries. Small integers keep every sum exact in any order.
using Tile = std::vector<std::vector<float>>;

Tile random_tile(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-64, 64);
  Tile c(32, std::vector<float>(32));
  for (auto& l : c)
    for (float& x : l) x = float(d(rng));
  return c;
}

std::map<int, float> direct_sums(const Tile& c) {
  std::map<int, float> want;
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 8; ++i)
      for (int e = 0; e < 4; ++e) {
        const int row = (lane >> 2) + 8 * (e >> 1), col = 8 * i + 2 * (lane & 3) + (e & 1);
        want[col - row] += c[size_t(lane)][size_t(4 * i + e)];
      }
  return want;
}

// Runs the per-thread accumulation and the warp reduction on each tile (one set of 32 lane threads
// for all of them); returns per tile: diagonal -> (sum, times seen).
std::vector<std::map<int, std::pair<float, int>>> reduce(const std::vector<Tile>& tiles) {
  HostWarp w;
  std::vector<std::vector<DiagSums>> res(tiles.size(), std::vector<DiagSums>(32));
  std::vector<std::thread> lanes;
  for (int lane = 0; lane < 32; ++lane)
    lanes.emplace_back([&, lane] {
      for (size_t k = 0; k < tiles.size(); ++k) {
        float m[kDiagPartials] = {};
        for (int i = 0; i < 8; ++i)
          for (int e = 0; e < 4; ++e) diag_accumulate(m, i, e, tiles[k][size_t(lane)][size_t(4 * i + e)]);
        res[k][size_t(lane)] = diag_reduce_warp(m, lane, HostShfl{&w, lane});
      }
    });
  for (auto& th : lanes) th.join();
  std::vector<std::map<int, std::pair<float, int>>> got(tiles.size());
  for (size_t k = 0; k < tiles.size(); ++k)
    for (int lane = 0; lane < 32; ++lane)
      for (int u = 0; u < res[k][size_t(lane)].n; ++u)
        for (int cb = 0; cb < 2; ++cb) {
          auto& s = got[k][diag_of(res[k][size_t(lane)], u, cb, lane)];
          s.first += res[k][size_t(lane)].out[u][cb];
          s.second += 1;
        }
  return got;
}

}  // namespace

TEST(DiagReduce, EveryDiagonalOnceWithItsSum) {
  std::vector<Tile> tiles;
  for (uint32_t seed = 1; seed <= 6; ++seed) tiles.push_back(random_tile(seed));
  const auto all = reduce(tiles);
  for (size_t k = 0; k < tiles.size(); ++k) {
    const std::map<int, float> want = direct_sums(tiles[k]);
    const auto& got = all[k];
    // Diagonals -15 .. 63 (79), plus the slot -16 that no entry reaches.
    ASSERT_EQ(want.size(), 79u);
    ASSERT_EQ(got.size(), 80u);
    for (const auto& [diag, s] : got) {
      EXPECT_EQ(s.second, 1) << "diagonal " << diag << " held by " << s.second << " lanes";
      if (diag == -16) {
        EXPECT_EQ(s.first, 0.f);
        continue;
      }
      ASSERT_TRUE(want.count(diag)) << diag;
      EXPECT_EQ(s.first, want.at(diag)) << "diagonal " << diag << " tile " << k;
    }
  }
}

TEST(DiagReduce, EveryEntryReachesExactlyItsDiagonal) {
  // Every (lane, entry) marked by a unique value, at most one per diagonal and tile (16 tiles: a diagonal
  // has <= 16 entries): each diagonal's sum must be exactly its one marked value. Catches a wrong partner
  // or frame for any lane and entry.
  std::vector<Tile> tiles(16, Tile(32, std::vector<float>(32, 0.f)));
  std::map<int, int> used;                                  // diagonal -> entries placed so far
  std::vector<std::map<int, float>> want(tiles.size());    // per tile: diagonal -> marked value
  for (int lane = 0; lane < 32; ++lane)
    for (int k = 0; k < 32; ++k) {
      const int row = (lane >> 2) + 8 * ((k & 3) >> 1), col = 8 * (k >> 2) + 2 * (lane & 3) + (k & 1);
      const int tile = used[col - row]++;
      ASSERT_LT(tile, 16);
      const float id = float(32 * lane + k + 1);
      tiles[size_t(tile)][size_t(lane)][size_t(k)] = id;
      want[size_t(tile)][col - row] = id;
    }
  const auto all = reduce(tiles);
  for (size_t t = 0; t < tiles.size(); ++t)
    for (const auto& [diag, s] : all[t]) {
      const auto it = want[t].find(diag);
      EXPECT_EQ(s.first, it == want[t].end() ? 0.f : it->second) << "tile " << t << " diagonal " << diag;
    }
}

// A warpgroup's four warps (rows 16 w .. 16 w + 15 of a 64 x 64 tile) put their sums into slots
// (wg_slot_of_warp_diag) and one thread per warpgroup diagonal adds the warps' slots (warp_slot_of_wg_diag), as
// bg_wg_store / bg_wg_flush do (kernels/sm90/bwd_buffer_grad_sm90.cuh): every slot is written once per tile, and
// every warpgroup diagonal -63 .. 63 comes out with the sum of its entries.
TEST(DiagReduce, WarpgroupSlotsGiveEveryWarpgroupDiagonalItsSum) {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    std::vector<Tile> warps;  // the warpgroup's four 16 x 64 parts
    for (int w = 0; w < 4; ++w) warps.push_back(random_tile(100 * seed + uint32_t(w)));
    std::map<int, float> want;  // warpgroup diagonal -> direct sum
    for (int w = 0; w < 4; ++w)
      for (const auto& [d, v] : direct_sums(warps[size_t(w)])) want[d - 16 * w] += v;
    ASSERT_EQ(want.size(), 127u);
    const auto sums = reduce(warps);
    std::vector<std::vector<float>> slots(4, std::vector<float>(kWgDiagSlots, std::nanf("")));
    for (int w = 0; w < 4; ++w)
      for (const auto& [d, s] : sums[size_t(w)]) {
        const int k = wg_slot_of_warp_diag(d);
        ASSERT_GE(k, 0);
        ASSERT_LT(k, kWgDiagSlots);
        EXPECT_TRUE(std::isnan(slots[size_t(w)][size_t(k)])) << "slot " << k << " written twice";
        slots[size_t(w)][size_t(k)] = s.first;
      }
    for (int w = 0; w < 4; ++w)
      for (int k = 0; k < kWgDiagSlots; ++k) EXPECT_FALSE(std::isnan(slots[size_t(w)][size_t(k)])) << w << " " << k;
    for (int dg = -63; dg <= 63; ++dg) {
      float s = 0.f;
      for (int w = 0; w < 4; ++w) {
        const int k = warp_slot_of_wg_diag(dg, w);
        if (k >= 1 && k < kWgDiagSlots) s += slots[size_t(w)][size_t(k)];
      }
      EXPECT_EQ(s, want.at(dg)) << "warpgroup diagonal " << dg;
    }
  }
}

TEST(DiagReduce, WarpSumGivesEveryLaneTheSameTotal) {
  HostWarp w;
  std::vector<float> v(32), r(32);
  for (int i = 0; i < 32; ++i) v[size_t(i)] = float(i * i - 40);
  std::vector<std::thread> lanes;
  for (int lane = 0; lane < 32; ++lane)
    lanes.emplace_back([&, lane] { r[size_t(lane)] = warp_sum(v[size_t(lane)], lane, HostShfl{&w, lane}); });
  for (auto& th : lanes) th.join();
  float want = 0;
  for (float x : v) want += x;
  for (float x : r) EXPECT_EQ(x, want);
}
