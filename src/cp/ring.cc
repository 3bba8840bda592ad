// The ring schedule over a Transport, independent of what a step computes.
#include "cp/ring.h"

#include <algorithm>
#include <string>

namespace flexattn::cp {
namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }

void check_ring(const char* who, const ShardPlan& plan, int rank, const Transport& t,
                const std::vector<const RingBuffers*>& buffers) {
  const std::string w = std::string(who) + ": ";
  const int n = plan.world_size;
  check(n >= 1 && plan.ranks.size() == size_t(n), w + "plan is malformed: world_size " + std::to_string(n) + " but " +
                                                      std::to_string(plan.ranks.size()) + " rank plans");
  check(0 <= rank && rank < n, w + "rank must be in [0, " + std::to_string(n) + "); got " + std::to_string(rank));
  check(t.world_size() == n && t.rank() == rank, w + "the transport is rank " + std::to_string(t.rank()) + " of " +
                                                     std::to_string(t.world_size()) + " but the call is for rank " +
                                                     std::to_string(rank) + " of the plan's " + std::to_string(n));
  check(plan.ranks[size_t(rank)].steps.size() == size_t(plan.ring_steps),
        w + "plan is malformed: rank " + std::to_string(rank) + " has " +
            std::to_string(plan.ranks[size_t(rank)].steps.size()) + " steps, ring_steps is " +
            std::to_string(plan.ring_steps));
  for (const RingBuffers* b : buffers) {
    check(b->shard_bytes.size() == size_t(n), w + "shard_bytes must list the " + std::to_string(n) + " shards; got " +
                                                  std::to_string(b->shard_bytes.size()));
    check(b->buffer[0] && (b->buffer[1] || plan.ring_steps <= 1), w + "both ring buffers must be set");
  }
}

// Post the exchange that moves the shard held at step t one hop: send it on, receive shard held at t+1.
void exchange(const ShardPlan& plan, int rank, Transport& t, const RingBuffers& b, int step) {
  const int n = plan.world_size, d = plan.direction;
  const int held = mod(rank - d * step, n), next = mod(rank - d * (step + 1), n);
  t.send(b.buffer[step % 2], b.shard_bytes[size_t(held)], mod(rank + d, n));
  t.recv(b.buffer[(step + 1) % 2], b.shard_bytes[size_t(next)], mod(rank - d, n));
}

}  // namespace

void run_ring_forward(const ShardPlan& plan, int rank, Transport& transport, const RingBuffers& kv,
                      const ForwardStepFn& step_fn) {
  check_ring("run_ring_forward", plan, rank, transport, {&kv});
  const auto& steps = plan.ranks[size_t(rank)].steps;
  for (int t = 0; t < plan.ring_steps; ++t) {
    const bool pass = t + 1 < plan.ring_steps;  // the last step sends nothing; truncated rings stop early
    if (pass) {
      transport.group_start();
      exchange(plan, rank, transport, kv, t);
      transport.group_end();
    }
    if (steps[size_t(t)].compute) step_fn(steps[size_t(t)], kv.buffer[t % 2]);
    if (pass) transport.wait();
  }
}

int run_ring_backward(const ShardPlan& plan, int rank, Transport& transport, const RingBuffers& kv,
                      const RingBuffers& dkv, const BackwardStepFn& step_fn) {
  check_ring("run_ring_backward", plan, rank, transport, {&kv, &dkv});
  const auto& steps = plan.ranks[size_t(rank)].steps;
  const int T = plan.ring_steps, n = plan.world_size;
  for (int t = 0; t < T; ++t) {
    const bool pass = t + 1 < T;
    if (pass) {
      transport.group_start();
      exchange(plan, rank, transport, kv, t);
      transport.group_end();
    }
    if (steps[size_t(t)].compute) step_fn(steps[size_t(t)], kv.buffer[t % 2], dkv.buffer[t % 2]);
    if (pass) {
      transport.group_start();
      exchange(plan, rank, transport, dkv, t);
      transport.group_end();
      transport.wait();
    }
  }
  if (T <= 1) return 0;  // the accumulator never left its owner
  // The held accumulator is T-1 hops from its owner; this rank's own is T-1 hops downstream.
  const int held = mod(rank - plan.direction * (T - 1), n), holder = mod(rank + plan.direction * (T - 1), n);
  transport.group_start();
  transport.send(dkv.buffer[(T - 1) % 2], dkv.shard_bytes[size_t(held)], held);
  transport.recv(dkv.buffer[T % 2], dkv.shard_bytes[size_t(rank)], holder);
  transport.group_end();
  transport.wait();
  return T % 2;
}

}  // namespace flexattn::cp

namespace flexattn::cp {

int64_t local_offset(const ShardPlan& plan, int rank, int chunk, bool kv) {
  int64_t off = 0;
  for (int c : plan.ranks.at(size_t(rank)).chunks) {
    if (c == chunk) return off;
    const Chunk& ch = plan.chunks.at(size_t(c));
    off += kv ? ch.kv_cols.size() : ch.q_rows.size();
  }
  throw Error("local_offset: chunk " + std::to_string(chunk) + " is not held by rank " + std::to_string(rank));
}

int64_t local_size(const ShardPlan& plan, int rank, bool kv) {
  int64_t n = 0;
  for (int c : plan.ranks.at(size_t(rank)).chunks) {
    const Chunk& ch = plan.chunks.at(size_t(c));
    n += kv ? ch.kv_cols.size() : ch.q_rows.size();
  }
  return n;
}

HostTensor gather_rank(const ShardPlan& plan, int rank, const HostTensor& whole, bool kv) {
  check(whole.shape.size() == 3 || whole.shape.size() == 4,
        "gather_rank: expected a [B, H, L] or [B, H, L, D] tensor; got rank " + std::to_string(whole.shape.size()));
  std::vector<int64_t> shape = whole.shape;
  shape[2] = local_size(plan, rank, kv);
  HostTensor r(whole.dtype, shape);
  const int64_t inner = shape.size() == 4 ? shape[3] : 1, BH = shape[0] * shape[1];
  int64_t off = 0;
  for (int c : plan.ranks.at(size_t(rank)).chunks) {
    const Range span = kv ? plan.chunks[size_t(c)].kv_cols : plan.chunks[size_t(c)].q_rows;
    for (int64_t bh = 0; bh < BH; ++bh)
      for (int64_t x = 0; x < span.size() * inner; ++x)
        r.set((bh * shape[2] + off) * inner + x, whole.get((bh * whole.shape[2] + span.begin) * inner + x));
    off += span.size();
  }
  return r;
}

void scatter_rank(const ShardPlan& plan, int rank, const HostTensor& local, bool kv, HostTensor* whole) {
  const int64_t inner = local.shape.size() == 4 ? local.shape[3] : 1, BH = local.shape[0] * local.shape[1];
  int64_t off = 0;
  for (int c : plan.ranks.at(size_t(rank)).chunks) {
    const Range span = kv ? plan.chunks[size_t(c)].kv_cols : plan.chunks[size_t(c)].q_rows;
    for (int64_t bh = 0; bh < BH; ++bh)
      for (int64_t x = 0; x < span.size() * inner; ++x)
        whole->set((bh * whole->shape[2] + span.begin) * inner + x, local.get((bh * local.shape[2] + off) * inner + x));
    off += span.size();
  }
}

}  // namespace flexattn::cp
