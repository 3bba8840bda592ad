#pragma once
// The ring executor (docs/cp.md §3): runs a ShardPlan's schedule for one rank over a Transport, with
// two kv buffers so the next shard arrives while the current one is used, and (backward) dk/dv
// accumulators travelling with the kv and returned to their owner in one final hop. What a step
// computes is a callback, so the same schedule drives the CPU oracle (tests) and the GPU kernels.
#include <functional>
#include <vector>

#include "cp/transport.h"
#include "flexattn/cp.h"

namespace flexattn::cp {

// Bytes each shard occupies in a ring buffer, by shard (= owning rank); every rank passes the same list.
struct RingBuffers {
  std::vector<size_t> shard_bytes;
  void* buffer[2] = {nullptr, nullptr};  // each at least max(shard_bytes); buffer[0] starts with shard `rank`
};

// The pieces of one computing step on the shard in `kv` (read only).
using ForwardStepFn = std::function<void(const RingStep& step, const void* kv)>;
// Also adds the step's dk/dv into `dkv`, the accumulators of the same shard.
using BackwardStepFn = std::function<void(const RingStep& step, const void* kv, void* dkv)>;

// Step t: post (send the held shard on, receive the next), compute on the held one, wait.
void run_ring_forward(const ShardPlan& plan, int rank, Transport& transport, const RingBuffers& kv,
                      const ForwardStepFn& step_fn);

// dkv.buffer[0] must start as this rank's shard's zeroed accumulators. Step t: post the kv exchange,
// compute, then post the accumulator exchange (it carries this step's sums), wait. After the last step
// each accumulator goes straight to its owner. Returns the index of the dkv buffer that then holds this
// rank's own shard's gradient.
int run_ring_backward(const ShardPlan& plan, int rank, Transport& transport, const RingBuffers& kv,
                      const RingBuffers& dkv, const BackwardStepFn& step_fn);

// ---- Local tensors of a rank ------------------------------------------------------------------------
// A rank's rows are its chunks' q rows in ascending chunk order; its shard is the same chunks' kv
// columns. `local_offset` is where chunk `chunk` starts in that concatenation (q rows or kv columns).
int64_t local_offset(const ShardPlan& plan, int rank, int chunk, bool kv);
int64_t local_size(const ShardPlan& plan, int rank, bool kv);
// Dim 2 of a whole-sequence tensor, gathered to a rank (q rows or kv columns of its chunks), and back.
HostTensor gather_rank(const ShardPlan& plan, int rank, const HostTensor& whole, bool kv);
void scatter_rank(const ShardPlan& plan, int rank, const HostTensor& local, bool kv, HostTensor* whole);

// ---- The ring on the CPU -----------------------------------------------------------------------------
// One rank's part, run by each of N threads with its own transport (InProcessHub): q holds the rank's
// rows, k and v its shard (see gather_rank); results are F64 for those rows. Shards travel as F64.
Merged cpu_ring_forward(const ShardPlan& plan, int rank, Transport& transport, const BlockMask& bm, const HostTensor& q,
                        const HostTensor& k, const HostTensor& v, const cpu::ModFns& mods,
                        const cpu::Options& options = {});

// out and lse: the rank's rows of the global forward result (cpu_ring_forward's), as the GPU backward
// kernels take them: each piece's gradient comes from the global lse (docs/cp.md §1), with no merge.
// dq is for the rank's rows, dk/dv for its shard.
cpu::BackwardResult cpu_ring_backward(const ShardPlan& plan, int rank, Transport& transport, const BlockMask& bm,
                                      const HostTensor& q, const HostTensor& k, const HostTensor& v,
                                      const HostTensor& out, const HostTensor& lse, const HostTensor& dout,
                                      const HostTensor* dlse, const cpu::ModFns& mods,
                                      const cpu::Options& options = {});

}  // namespace flexattn::cp
