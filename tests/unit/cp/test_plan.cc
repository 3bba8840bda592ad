// plan_shards: chunk geometry, correctness of the needed/skipped sets against the mask itself (not
// the block mask), work accounting, the ring schedule, and load balance.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "cp_test_util.h"

namespace {

using namespace cp_test;
using flexattn::cp::chunks_of_rank;
using flexattn::cp::Layout;
using flexattn::cp::plan_shards;
using flexattn::cp::ShardPlan;

flexattn::BlockMask make_mask(const Mask& m, int64_t B, int64_t H, int64_t len, int block) {
  return flexattn::build_block_mask(flexattn::MaskFn(m), B, H, len, len, block, block, 1);
}

void check_geometry(const ShardPlan& p, const std::string& what) {
  const int n_chunks = p.layout == Layout::zigzag ? 2 * p.world_size : p.world_size;
  ASSERT_EQ(int(p.chunks.size()), n_chunks) << what;
  int64_t q_end = 0, kv_end = 0, min_blocks = 1 << 30, max_blocks = 0;
  for (const auto& c : p.chunks) {
    EXPECT_EQ(c.q_rows.begin, q_end) << what;
    EXPECT_EQ(c.kv_cols.begin, kv_end) << what;
    EXPECT_EQ(c.q_rows.begin, c.q_blocks.begin * p.q_block) << what;
    q_end = c.q_rows.end, kv_end = c.kv_cols.end;
    min_blocks = std::min(min_blocks, c.q_blocks.size());
    max_blocks = std::max(max_blocks, c.q_blocks.size());
  }
  EXPECT_EQ(q_end, p.q_len) << what;
  EXPECT_EQ(kv_end, p.kv_len) << what;
  EXPECT_LE(max_blocks - min_blocks, 1) << what;
  // Every chunk is held by exactly one rank.
  std::multiset<int> held;
  for (const auto& r : p.ranks) held.insert(r.chunks.begin(), r.chunks.end());
  for (int c = 0; c < n_chunks; ++c) EXPECT_EQ(held.count(c), 1u) << what << " chunk " << c;
}

// Needed/skipped against the mask function, element by element, and the schedule's consistency.
void check_plan(const ShardPlan& p, const flexattn::BlockMask& bm, const Mask& m, const std::string& what) {
  check_geometry(p, what);
  const int n = p.world_size;
  const std::vector<uint8_t> cls = flexattn::to_dense(bm);
  double total_work = 0;
  for (int r = 0; r < n; ++r) {
    const auto& rp = p.ranks[size_t(r)];
    std::set<int> needed(rp.needed_shards.begin(), rp.needed_shards.end());
    std::set<int> skipped(rp.skipped_shards.begin(), rp.skipped_shards.end());
    EXPECT_EQ(needed.size() + skipped.size(), size_t(n)) << what;
    for (int s = 0; s < n; ++s) {
      ASSERT_NE(needed.count(s), skipped.count(s)) << what << " rank " << r << " shard " << s;
      bool any_element = false, any_tile = false;
      for (int qc : rp.chunks)
        for (int kc : p.ranks[size_t(s)].chunks) {
          const auto& a = p.chunks[size_t(qc)];
          const auto& b = p.chunks[size_t(kc)];
          for (int64_t bh = 0; bh < bm.B * bm.H; ++bh) {
            for (int64_t i = a.q_rows.begin; i < a.q_rows.end; ++i)
              for (int64_t j = b.kv_cols.begin; j < b.kv_cols.end; ++j) any_element |= m(bh / bm.H, bh % bm.H, i, j);
            for (int64_t qb = a.q_blocks.begin; qb < a.q_blocks.end; ++qb)
              for (int64_t kb = b.kv_blocks.begin; kb < b.kv_blocks.end; ++kb)
                any_tile |= cls[size_t((bh * bm.nq + qb) * bm.nkv + kb)] != flexattn::kBlockSkipped;
          }
        }
      // Skipped shards are truly empty; every non-empty tile of the rank's rows is in a needed shard.
      if (skipped.count(s)) {
        EXPECT_FALSE(any_element) << what << " rank " << r << " skips shard " << s;
      }
      EXPECT_EQ(needed.count(s) == 1, any_tile) << what << " rank " << r << " shard " << s;
      // build_block_mask is exact and chunks are whole blocks, so needed tiles hold a True element.
      EXPECT_EQ(any_tile, any_element) << what << " rank " << r << " shard " << s;
    }
    // Schedule: step t holds shard (r - direction t) mod n; each needed shard computed exactly once.
    ASSERT_EQ(int(rp.steps.size()), p.ring_steps) << what;
    std::multiset<int> computed;
    double work = 0;
    for (int t = 0; t < p.ring_steps; ++t) {
      const auto& st = rp.steps[size_t(t)];
      EXPECT_EQ(st.kv_shard, ((r - p.direction * t) % n + n) % n) << what;
      EXPECT_EQ(st.compute, needed.count(st.kv_shard) == 1) << what;
      EXPECT_EQ(st.compute, !st.pieces.empty()) << what;
      if (st.compute) computed.insert(st.kv_shard);
      double w = 0;
      for (const auto& pc : st.pieces) {
        EXPECT_GT(pc.tiles, 0) << what;
        w += pc.work;
      }
      EXPECT_DOUBLE_EQ(st.work, w) << what;
      work += st.work;
    }
    EXPECT_EQ(computed, std::multiset<int>(needed.begin(), needed.end())) << what << " rank " << r;
    EXPECT_DOUBLE_EQ(rp.work, work) << what;
    total_work += rp.work;
  }
  EXPECT_NEAR(p.mean_work * n, total_work, 1e-9 * (1 + total_work)) << what;
}

TEST(Plan, ChunksOfRank) {
  EXPECT_EQ(chunks_of_rank(2, 4, Layout::contiguous), std::vector<int>{2});
  EXPECT_EQ(chunks_of_rank(0, 4, Layout::zigzag), (std::vector<int>{0, 7}));
  EXPECT_EQ(chunks_of_rank(3, 4, Layout::zigzag), (std::vector<int>{3, 4}));
}

TEST(Plan, NeededShardsAreExactForEveryMaskAndLayout) {
  // 45 = 11 blocks of 4 + a tail of 1: chunks of unequal size, a tail tile.
  const int64_t len = 45;
  for (const NamedMask& m : self_masks(len)) {
    for (int64_t H : {1, 2}) {
      const flexattn::BlockMask bm = make_mask(m.fn, 1, H, len, 4);
      for (Layout layout : {Layout::contiguous, Layout::zigzag})
        for (int n : {1, 2, 3, 5}) {
          const ShardPlan p = plan_shards(bm, n, layout);
          check_plan(p, bm, m.fn, m.name + " H=" + std::to_string(H) + " " + layout_name(layout) + " N=" +
                                      std::to_string(n));
        }
    }
  }
}

TEST(Plan, WorkCountsTilesWithPartialWeight) {
  // Causal, 4 blocks of 8, one rank: 4 partial (diagonal) + 6 full tiles.
  const flexattn::BlockMask bm = make_mask([](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; }, 1, 1, 32, 8);
  EXPECT_DOUBLE_EQ(plan_shards(bm, 1, Layout::contiguous).max_work, 6 + 4 * 1.2);
  EXPECT_DOUBLE_EQ(plan_shards(bm, 1, Layout::contiguous, {2.0}).max_work, 6 + 4 * 2.0);
  // A tail tile counts by its area: 30 = 3 blocks + 6 rows; the last diagonal tile is 6x6 of 8x8.
  const flexattn::BlockMask tail =
      make_mask([](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; }, 1, 1, 30, 8);
  EXPECT_DOUBLE_EQ(plan_shards(tail, 1, Layout::contiguous, {1.0}).max_work, 3 + 3 + 3 * 6.0 / 8 + 36.0 / 64);
}

TEST(Plan, ZigzagBalancesCausal) {
  const Mask causal = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; };
  // 2048 = 64 blocks of 32 (chunks of equal size); 1000 = 62 blocks + a tail (unequal chunks).
  for (int64_t len : {2048, 1000}) {
    const flexattn::BlockMask bm = make_mask(causal, 1, 1, len, len == 2048 ? 32 : 16);
    for (int n : {2, 4, 8}) {
      const ShardPlan zz = plan_shards(bm, n, Layout::zigzag);
      const ShardPlan ct = plan_shards(bm, n, Layout::contiguous);
      EXPECT_LT(zz.imbalance(), 0.10) << "len " << len << " N=" << n;
      // Contiguous: the last rank does ~(2N-1)/N of the mean.
      EXPECT_GT(ct.imbalance(), 0.4) << "len " << len << " N=" << n;
      EXPECT_NEAR(zz.mean_work, ct.mean_work, 1e-9 * ct.mean_work);
      EXPECT_EQ(zz.ring_steps, n);  // causal needs every earlier shard: the full ring
    }
  }
}

TEST(Plan, RingIsTruncatedForLocalMasks) {
  const int64_t len = 256;
  // Window 20 < chunk of 64: a rank needs its own shard and the previous one.
  const Mask back = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q && q - kv < 20; };
  const ShardPlan p = plan_shards(make_mask(back, 1, 1, len, 16), 4, Layout::contiguous);
  EXPECT_EQ(p.ring_steps, 2);
  EXPECT_EQ(p.direction, 1);
  EXPECT_EQ(p.ranks[2].needed_shards, (std::vector<int>{2, 1}));
  EXPECT_EQ(p.ranks[0].needed_shards, std::vector<int>{0});
  // Looking forward instead: the ring turns the other way.
  const Mask fwd = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv >= q && kv - q < 20; };
  const ShardPlan f = plan_shards(make_mask(fwd, 1, 1, len, 16), 4, Layout::contiguous);
  EXPECT_EQ(f.ring_steps, 2);
  EXPECT_EQ(f.direction, -1);
  EXPECT_EQ(f.ranks[1].needed_shards, (std::vector<int>{1, 2}));
  // Zigzag splits neighbours apart: each rank needs shards on both sides, the whole ring.
  EXPECT_EQ(plan_shards(make_mask(back, 1, 1, len, 16), 4, Layout::zigzag).ring_steps, 4);
  // Documents aligned with the chunks: every rank needs only itself, one step, no communication.
  const Mask docs = [](int64_t, int64_t, int64_t q, int64_t kv) { return q / 64 == kv / 64; };
  const ShardPlan d = plan_shards(make_mask(docs, 1, 1, len, 16), 4, Layout::contiguous);
  EXPECT_EQ(d.ring_steps, 1);
  for (const auto& r : d.ranks) EXPECT_EQ(r.skipped_shards.size(), 3u);
}

TEST(Plan, EmptyMaskNeedsNothing) {
  const flexattn::BlockMask bm = make_mask([](int64_t, int64_t, int64_t, int64_t) { return false; }, 1, 1, 64, 8);
  const ShardPlan p = plan_shards(bm, 2, Layout::zigzag);
  EXPECT_EQ(p.ring_steps, 0);
  EXPECT_EQ(p.max_work, 0);
  EXPECT_EQ(p.imbalance(), 0);
  for (const auto& r : p.ranks) {
    EXPECT_TRUE(r.needed_shards.empty());
    EXPECT_TRUE(r.steps.empty());
  }
}

TEST(Plan, MaskWithoutFullBlocksOrQSide) {
  // from_kv_blocks-style input: partial blocks only, no q_* transposes (compute_q_blocks=False).
  flexattn::BlockMask bm = make_mask([](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; }, 1, 1, 32, 8);
  flexattn::BlockMask partial_only =
      flexattn::from_kv_blocks(bm.kv_num_blocks, bm.kv_indices, nullptr, nullptr, 1, 1, 4, 4, 8, 8, 32, 32);
  partial_only.q_num_blocks.clear();
  partial_only.q_indices.clear();
  const ShardPlan p = plan_shards(partial_only, 2, Layout::contiguous, {1.5});
  EXPECT_DOUBLE_EQ(p.ranks[0].work + p.ranks[1].work, 4 * 1.5);
}

}  // namespace
