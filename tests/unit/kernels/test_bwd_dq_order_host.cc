// kernels/sm90/bwd_dq_order_sm90.h as host C++: the rank the deterministic sm90 backward gives kv tile j at
// query tile i must be exactly the number of kv tiles above j whose backward walk visits i (the kernel walks
// the transposed block lists, the rank reads the kv lists), so the ranks of a query tile's contributors are
// 0, 1, ..., n - 1 from the highest kv tile down; otherwise the ordered reductions wait forever (or until
// the kernel's timeout).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <vector>

#include "common/params.h"
#include "common/mask_iter.cuh"  // the kernel's own walk, which the ranks are checked against
#include "sm90/bwd_dq_claim_rule_sm90.h"
#include "sm90/bwd_dq_order_sm90.h"

namespace {

using flexattn::kern::AttnParams;
using namespace flexattn::kern::sm90;
using Mask = std::function<bool(int b, int h, int q, int kv)>;

// Block lists as torch's create_block_mask builds them (partial / full per (b, h, block row), transposed
// lists per block column), from a mask predicate over [0, L) x [0, S).
struct Lists {
  int mB, mH, nq, nkv;
  std::vector<int> kv_num, kv_ind, fkv_num, fkv_ind, q_num, q_ind, fq_num, fq_ind;

  Lists(int mB_, int mH_, int L, int S, int qb, int kb, const Mask& m) : mB(mB_), mH(mH_) {
    nq = (L + qb - 1) / qb, nkv = (S + kb - 1) / kb;
    kv_num.assign(mB * mH * nq, 0), fkv_num = kv_num, kv_ind.assign(mB * mH * nq * nkv, -7), fkv_ind = kv_ind;
    q_num.assign(mB * mH * nkv, 0), fq_num = q_num, q_ind.assign(mB * mH * nkv * nq, -7), fq_ind = q_ind;
    for (int b = 0; b < mB; ++b)
      for (int h = 0; h < mH; ++h)
        for (int r = 0; r < nq; ++r)
          for (int c = 0; c < nkv; ++c) {
            int on = 0, all = 0;
            for (int q = r * qb; q < std::min(L, (r + 1) * qb); ++q)
              for (int k = c * kb; k < std::min(S, (c + 1) * kb); ++k) on += m(b, h, q, k), ++all;
            if (on == 0) continue;
            const int row = (b * mH + h) * nq + r, col = (b * mH + h) * nkv + c;
            auto& n = on == all ? fkv_num : kv_num;
            auto& ind = on == all ? fkv_ind : kv_ind;
            ind[row * nkv + n[row]++] = c;
            auto& tn = on == all ? fq_num : q_num;
            auto& tind = on == all ? fq_ind : q_ind;
            tind[col * nq + tn[col]++] = r;
          }
  }

  void fill(AttnParams& p, int qb, int kb) const {
    p.kv_num_blocks = kv_num.data(), p.kv_indices = kv_ind.data();
    p.full_kv_num_blocks = fkv_num.data(), p.full_kv_indices = fkv_ind.data();
    p.q_num_blocks = q_num.data(), p.q_indices = q_ind.data();
    p.full_q_num_blocks = fq_num.data(), p.full_q_indices = fq_ind.data();
    p.mask_B = mB, p.mask_H = mH, p.nq = nq, p.nkv = nkv, p.q_block = qb, p.kv_block = kb;
  }
};

// The query tiles (start rows) the backward CTA of kv tile j visits for (b, h): the kernel's own walk (init_q_walker,
// 64-row tiles inside each listed block of the tile's mask column).
std::vector<int> walk(const AttnParams& p, int b, int h, int j) {
  std::vector<int> out;
  flexattn::kern::TileWalker w;
  flexattn::kern::init_q_walker(w, p, b, h, j * 128, 64);
  while (w.next<true>()) out.push_back(w.start);  // as BwdTileIter walks
  return out;
}

// The ordered dQ's progress model: every kv tile's CTA starts at once and takes one step per query tile of its walk,
// and adds into a query tile only one step after the contributor above it has. The last CTA's end (in steps).
int ordered_walk_steps(const AttnParams& p, int b, int h) {
  const int tiles = (p.S + 127) / 128;
  std::map<int, int> added;  // q0 -> the step its latest contributor added at
  int end = 0;
  for (int j = tiles - 1; j >= 0; --j) {  // the highest kv tile adds first
    int t = 0;
    for (int q0 : walk(p, b, h, j)) {
      const auto it = added.find(q0);
      t = std::max(t + 1, it == added.end() ? 0 : it->second + 1);
      added[q0] = t;
    }
    end = std::max(end, t);
  }
  return end;
}

// Every contributor's rank, from one lane and summed over 32 lanes, against the walk.
void expect_ranks_follow_the_walk(const AttnParams& p, int B, int H) {
  const int tiles = (p.S + 127) / 128;
  int checked = 0;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      std::map<int, std::vector<int>> contributors;  // q0 -> kv tiles, ascending
      for (int j = 0; j < tiles; ++j)
        for (int q0 : walk(p, b, h, j)) contributors[q0].push_back(j);
      for (const auto& [q0, js] : contributors)
        for (size_t k = 0; k < js.size(); ++k) {
          const int want = int(js.size() - 1 - k);
          ASSERT_EQ(bwd_dq_rank_part(p, b, h, q0, js[k], 0, 1), want) << "b " << b << " h " << h << " q0 " << q0
                                                                      << " kv tile " << js[k];
          int lanes = 0;
          for (int lane = 0; lane < 32; ++lane) lanes += bwd_dq_rank_part(p, b, h, q0, js[k], lane, 32);
          ASSERT_EQ(lanes, want);
          ++checked;
        }
    }
  EXPECT_GT(checked, 0);
}

AttnParams problem(int B, int H, int L, int S) {
  AttnParams p{};
  p.B = B, p.Hq = p.Hkv = H, p.Bkv = B, p.L = L, p.S = S;
  return p;
}

TEST(BwdDqOrderHost, WithoutABlockMaskEveryKvTileContributesHighestFirst) {
  for (int S : {1, 127, 128, 129, 1000, 4097}) {
    const AttnParams p = problem(1, 1, 1000, S);
    expect_ranks_follow_the_walk(p, 1, 1);
  }
}

TEST(BwdDqOrderHost, CausalMaskAtTheKernelsBlockSizes) {
  for (int n : {1, 17, 129, 1000}) {
    AttnParams p = problem(2, 3, n, n);
    const Lists l(1, 1, n, n, 128, 128, [](int, int, int q, int k) { return k <= q; });
    l.fill(p, 128, 128);
    expect_ranks_follow_the_walk(p, 2, 3);
  }
}

TEST(BwdDqOrderHost, LargerBlocksPartialLastBlockAndPerHeadMasks) {
  // kv blocks of 256 (two kv tiles each; the last one cut at S), q blocks of 192, a sliding window per
  // head and a document mask per batch.
  AttnParams p = problem(2, 2, 1000, 1100);
  const Lists l(2, 2, 1000, 1100, 192, 256, [](int b, int h, int q, int k) {
    const bool window = q - k < 300 + 200 * h && k - q < 100;
    return window && (q / (400 + 100 * b)) == (k / (400 + 100 * b));
  });
  l.fill(p, 192, 256);
  expect_ranks_follow_the_walk(p, 2, 2);
}

TEST(BwdDqOrderHost, EmptyRowsHaveNoContributorsAndStrayIndicesCountNothing) {
  AttnParams p = problem(1, 1, 256, 512);
  Lists l(1, 1, 256, 512, 128, 128, [](int, int, int q, int k) { return q >= 128 && k < 128; });
  l.fill(p, 128, 128);
  expect_ranks_follow_the_walk(p, 1, 1);
  // Padding entries past the count and out-of-range block indices are never counted.
  EXPECT_EQ(bwd_dq_tiles_above(-1, 128, 512, 4, 0), 0);
  EXPECT_EQ(bwd_dq_tiles_above(4, 128, 512, 4, 0), 0);
  EXPECT_EQ(bwd_dq_tiles_above(3, 128, 512, 4, 0), 1);
  EXPECT_EQ(bwd_dq_tiles_above(1, 256, 1000, 4, 0), 2);  // rows 256..511: tiles 2 and 3
  EXPECT_EQ(bwd_dq_tiles_above(3, 256, 1000, 4, 6), 1);  // rows 768..999: tiles 6, 7; above 6: 7
}

// The walk merges the partial and the full lists in ascending query order, so a kv tile meets its predecessors'
// arrivals: with partial then full, a sliding window's far edge (a partial block) came before the blocks between
// (full), and each kv tile waited for the whole walk of the one above it (session 19 on the H200: 12.4 ms
// deterministic against 0.84 ms, B=2 H=16 S=8192 D=128).
TEST(BwdDqOrderHost, WalksAscendSoTheOrderNeverWaitsOnStaggeredMasks) {
  const int n = 4096;
  const std::vector<std::pair<const char*, Mask>> masks = {
      {"causal", [](int, int, int q, int k) { return k <= q; }},
      {"sliding window 1024", [](int, int, int q, int k) { return k <= q && q - k < 1024; }},
      {"band", [](int, int, int q, int k) { return q - k < 700 && k - q < 300; }},
  };
  for (const auto& [name, m] : masks) {
    AttnParams p = problem(1, 1, n, n);
    const Lists l(1, 1, n, n, 128, 128, m);
    l.fill(p, 128, 128);
    size_t longest = 0;
    for (int j = 0; j < n / 128; ++j) {
      const std::vector<int> w = walk(p, 0, 0, j);
      EXPECT_TRUE(std::is_sorted(w.begin(), w.end())) << name << " kv tile " << j;
      longest = std::max(longest, w.size());
    }
    EXPECT_LE(ordered_walk_steps(p, 0, 0), int(longest) + 2) << name;
  }
}

TEST(BwdDqOrderHost, SemaphoresOnePerQueryTilePlusTheAbandonWord) {
  EXPECT_EQ(bwd_dq_semaphores(2, 3, 1), 2 * 3 * 1 + 1);
  EXPECT_EQ(bwd_dq_semaphores(2, 3, 129), 2 * 3 * 3 + 1);
  EXPECT_EQ(bwd_dq_semaphore_index(129, 0, 128), 2);
  EXPECT_EQ(bwd_dq_semaphore_index(129, 5, 128), 5 * 3 + 2);
  EXPECT_EQ(bwd_dq_semaphore_index(129, 5, 128) + 1, bwd_dq_semaphores(2, 3, 129) - 1);
}

// kernels/sm90/bwd_dq_claim_rule_sm90.h: the kv span of a query tile covers every kv tile whose walk visits it (so a
// tile with more writers than the limit allows is never opened), exactly at kv blocks of the kernel's 128 rows.
TEST(BwdDqClaimRuleHost, KvSpanCoversTheWalkersAndTheLimitSplitsTheTiles) {
  for (int n : {17, 129, 1000, 4097}) {
    AttnParams p = problem(1, 2, n, n);
    const Lists l(1, 2, n, n, 128, 128, [](int, int h, int q, int k) { return k <= q && q - k < 300 + 700 * h; });
    l.fill(p, 128, 128);
    const int tiles = (n + 127) / 128;
    for (int h = 0; h < 2; ++h) {
      std::map<int, int> writers;
      for (int j = 0; j < tiles; ++j)
        for (int q0 : walk(p, 0, h, j)) ++writers[q0];
      for (int q0 = 0; q0 < n; q0 += 64) {
        const int w = writers.count(q0) ? writers[q0] : 0;
        ASSERT_EQ(bwd_dq_kv_span(p, 0, h, q0), 128LL * w) << "n " << n << " h " << h << " q0 " << q0;
        p.dq_claim_max_kv = 128 * w;
        EXPECT_EQ(bwd_dq_claim_initial(p, 0, h, q0), kDqClaimOpen);
        p.dq_claim_max_kv = 128 * w - 1;
        EXPECT_EQ(bwd_dq_claim_initial(p, 0, h, q0), w == 0 ? kDqClaimOpen : kDqClaimStored);
      }
    }
  }
}

TEST(BwdDqClaimRuleHost, WithoutABlockMaskTheSpanIsEveryKvRowAndPastTheMaskNone) {
  AttnParams p = problem(1, 1, 300, 4097);
  p.dq_claim_max_kv = 4096;
  EXPECT_EQ(bwd_dq_kv_span(p, 0, 0, 0), 4097);
  EXPECT_EQ(bwd_dq_claim_initial(p, 0, 0, 256), kDqClaimStored);
  p.dq_claim_max_kv = 4097;
  EXPECT_EQ(bwd_dq_claim_initial(p, 0, 0, 256), kDqClaimOpen);
  // kv blocks of 256 count whole (a partial last one too); full blocks count beside partial ones; a row past the
  // mask's rows has no writers.
  const Lists l(1, 1, 300, 4097, 128, 256, [](int, int, int q, int k) { return k < 100 + q || k >= 4000; });
  l.fill(p, 128, 256);
  EXPECT_EQ(bwd_dq_kv_span(p, 0, 0, 0), 256LL * 3);    // blocks 0 and 15 partial, 16 (one row, 4096) full
  EXPECT_EQ(bwd_dq_kv_span(p, 0, 0, 128), 256LL * 4);  // blocks 0, 1 and 15 partial, 16 full
  p.nq = 1;
  EXPECT_EQ(bwd_dq_kv_span(p, 0, 0, 128), 0);
}

}  // namespace
