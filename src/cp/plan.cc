// The sharding planner: chunks, the kv shards each rank needs, work estimates, the ring schedule.
#include <algorithm>
#include <cmath>
#include <string>

#include "flexattn/cp.h"

namespace flexattn::cp {
namespace {

// n blocks into c chunks of floor/ceil(n / c) blocks, the larger ones last.
Range block_range(int64_t n, int c, int i) { return {n * i / c, n * (i + 1) / c}; }

Range token_range(Range blocks, int block, int64_t len) {
  return {blocks.begin * block, std::min(len, blocks.end * block)};
}

int mod(int a, int n) { return ((a % n) + n) % n; }

// Work and tile counts of every (q chunk, kv chunk) pair, summed over the mask's B x H.
struct PairTable {
  int n = 0;
  std::vector<double> work;
  std::vector<int64_t> tiles;
};

PairTable pair_table(const BlockMask& bm, const std::vector<uint8_t>& cls, const std::vector<Chunk>& chunks,
                     double partial_weight) {
  const int n = int(chunks.size());
  std::vector<int> q_chunk(size_t(bm.nq)), kv_chunk(size_t(bm.nkv));
  for (int c = 0; c < n; ++c) {
    for (int64_t b = chunks[size_t(c)].q_blocks.begin; b < chunks[size_t(c)].q_blocks.end; ++b) q_chunk[size_t(b)] = c;
    for (int64_t b = chunks[size_t(c)].kv_blocks.begin; b < chunks[size_t(c)].kv_blocks.end; ++b)
      kv_chunk[size_t(b)] = c;
  }
  PairTable t{n, std::vector<double>(size_t(n * n), 0.0), std::vector<int64_t>(size_t(n * n), 0)};
  const double tile_area = double(bm.q_block) * double(bm.kv_block);
  for (int64_t bh = 0; bh < bm.B * bm.H; ++bh) {
    for (int64_t qb = 0; qb < bm.nq; ++qb) {
      const double rows = double(std::min<int64_t>(bm.q_block, bm.q_len - qb * bm.q_block));
      for (int64_t kb = 0; kb < bm.nkv; ++kb) {
        const uint8_t k = cls[size_t((bh * bm.nq + qb) * bm.nkv + kb)];
        if (k == kBlockSkipped) continue;
        const double cols = double(std::min<int64_t>(bm.kv_block, bm.kv_len - kb * bm.kv_block));
        const size_t p = size_t(q_chunk[size_t(qb)] * n + kv_chunk[size_t(kb)]);
        t.tiles[p] += 1;
        t.work[p] += (k == kBlockPartial ? partial_weight : 1.0) * rows * cols / tile_area;
      }
    }
  }
  return t;
}

// Hops a shard travels from its owner to `rank` when shards move `direction` one rank per step.
int distance(int rank, int shard, int direction, int n) { return mod((rank - shard) * direction, n); }

}  // namespace

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::contiguous:
      return "contiguous";
    case Layout::zigzag:
      return "zigzag";
  }
  return "?";
}

std::vector<int> chunks_of_rank(int rank, int world_size, Layout layout) {
  check(world_size >= 1, "chunks_of_rank: world_size must be >= 1; got " + std::to_string(world_size));
  check(0 <= rank && rank < world_size, "chunks_of_rank: rank must be in [0, world_size = " +
                                            std::to_string(world_size) + "); got " + std::to_string(rank));
  check(layout == Layout::contiguous || layout == Layout::zigzag,
        "chunks_of_rank: layout must be Layout::contiguous or Layout::zigzag; got " + std::to_string(int(layout)));
  if (layout == Layout::contiguous) return {rank};
  return {rank, 2 * world_size - 1 - rank};
}

ShardPlan plan_shards(const BlockMask& bm, int world_size, Layout layout, const PlanOptions& options) {
  check(world_size >= 1, "plan_shards: world_size must be >= 1; got " + std::to_string(world_size));
  check(layout == Layout::contiguous || layout == Layout::zigzag,
        "plan_shards: layout must be Layout::contiguous or Layout::zigzag; got " + std::to_string(int(layout)));
  check(std::isfinite(options.partial_weight) && options.partial_weight > 0,
        "plan_shards: options.partial_weight must be finite and > 0; got " + std::to_string(options.partial_weight));
  // Only the kv side is read: a mask without q_* (compute_q_blocks=False) can still be planned.
  std::vector<uint8_t> cls;
  try {
    cls = to_dense(bm);
  } catch (const Error& e) {
    throw Error(std::string("plan_shards: bm is malformed: ") + e.what());
  }
  const int n_chunks = layout == Layout::zigzag ? 2 * world_size : world_size;
  const auto enough = [&](const char* side, int64_t blocks, int64_t len, int block) {
    check(blocks >= n_chunks, std::string("plan_shards: the ") + layout_name(layout) + " layout cuts the sequence into " +
                                  std::to_string(n_chunks) + " chunks of whole blocks, but bm has only " +
                                  std::to_string(blocks) + " " + side + " blocks (" + side + "_len=" +
                                  std::to_string(len) + ", " + side + "_block=" + std::to_string(block) +
                                  "); use fewer ranks (world_size) or smaller blocks");
  };
  enough("q", bm.nq, bm.q_len, bm.q_block);
  enough("kv", bm.nkv, bm.kv_len, bm.kv_block);

  ShardPlan plan;
  plan.world_size = world_size, plan.layout = layout;
  plan.B = bm.B, plan.H = bm.H, plan.q_len = bm.q_len, plan.kv_len = bm.kv_len;
  plan.q_block = bm.q_block, plan.kv_block = bm.kv_block;
  for (int c = 0; c < n_chunks; ++c) {
    Chunk ch;
    ch.q_blocks = block_range(bm.nq, n_chunks, c);
    ch.kv_blocks = block_range(bm.nkv, n_chunks, c);
    ch.q_rows = token_range(ch.q_blocks, bm.q_block, bm.q_len);
    ch.kv_cols = token_range(ch.kv_blocks, bm.kv_block, bm.kv_len);
    plan.chunks.push_back(ch);
  }
  const PairTable t = pair_table(bm, cls, plan.chunks, options.partial_weight);

  // need[r][s]: rank r has a non-skipped tile in the columns of shard s.
  const int n = world_size;
  std::vector<std::vector<int>> held(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) held[size_t(r)] = chunks_of_rank(r, n, layout);
  std::vector<uint8_t> need(size_t(n * n), 0);
  for (int r = 0; r < n; ++r)
    for (int s = 0; s < n; ++s)
      for (int qc : held[size_t(r)])
        for (int kc : held[size_t(s)]) need[size_t(r * n + s)] |= t.tiles[size_t(qc * t.n + kc)] > 0;

  // The ring direction that needs fewer steps; +1 on ties.
  int best_steps = -1;
  for (int dir : {1, -1}) {
    int steps = 0;
    for (int r = 0; r < n; ++r)
      for (int s = 0; s < n; ++s)
        if (need[size_t(r * n + s)]) steps = std::max(steps, 1 + distance(r, s, dir, n));
    if (best_steps < 0 || steps < best_steps) best_steps = steps, plan.direction = dir;
  }
  plan.ring_steps = best_steps;

  double total = 0;
  for (int r = 0; r < n; ++r) {
    RankPlan rp;
    rp.chunks = held[size_t(r)];
    for (int step = 0; step < n; ++step) {  // ring order: own shard first, then as they arrive
      const int s = mod(r - plan.direction * step, n);
      (need[size_t(r * n + s)] ? rp.needed_shards : rp.skipped_shards).push_back(s);
    }
    for (int step = 0; step < plan.ring_steps; ++step) {
      RingStep st;
      st.kv_shard = mod(r - plan.direction * step, n);
      st.compute = need[size_t(r * n + st.kv_shard)];
      if (st.compute) {
        for (int qc : rp.chunks)
          for (int kc : held[size_t(st.kv_shard)]) {
            const size_t p = size_t(qc * t.n + kc);
            if (t.tiles[p] == 0) continue;
            st.pieces.push_back({qc, kc, t.tiles[p], t.work[p]});
            st.work += t.work[p];
          }
      }
      rp.work += st.work;
      rp.steps.push_back(std::move(st));
    }
    total += rp.work;
    plan.max_work = std::max(plan.max_work, rp.work);
    plan.ranks.push_back(std::move(rp));
  }
  plan.mean_work = total / n;
  return plan;
}

}  // namespace flexattn::cp
