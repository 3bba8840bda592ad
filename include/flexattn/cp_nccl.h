#pragma once
// Context parallelism over NCCL: one process (or thread) per GPU runs its rank of a ShardPlan with
// ring_forward / ring_backward; kv shards travel around the ring while each rank attends its rows to
// the shards its mask needs (docs/cp.md §3). libnccl is loaded at run time ($FLEXATTN_LIBNCCL,
// default libnccl.so.2): building and every CPU path need no NCCL.
//
// Mods see global positions: each piece runs with ForwardArgs/BackwardArgs q_offset / kv_offset set to
// its place in the sequence (docs/cp.md §4), so causal, document and window masks are exact per piece.
// Single-GPU parts checked (gpu_cp_check); the NCCL ring itself has not run on several GPUs yet
// (`make multigpu-test`).
#include <cstddef>
#include <memory>

#include "flexattn/attention.h"
#include "flexattn/cp.h"

namespace flexattn::cp {

// ncclUniqueId: made on one rank, handed to every rank by the caller (a file, a socket, torch.distributed).
struct NcclUniqueId {
  char bytes[128];
};
NcclUniqueId nccl_unique_id();

// An NCCL communicator of one rank, bound to `device`, with its own communication stream.
class Communicator {
 public:
  struct Impl;
  explicit Communicator(std::unique_ptr<Impl> impl);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  int rank() const;
  int world_size() const;
  int device() const;
  Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Collective: every rank calls it with the same id and world_size. Throws flexattn::Error naming the
// failing NCCL call.
std::unique_ptr<Communicator> nccl_init(const NcclUniqueId& id, int rank, int world_size, int device);

struct RingForwardArgs {
  // q: the rank's rows [B, Hq, L_rank, D] (its chunks' rows, ascending chunk order: gather_rank);
  // k, v: its shard [Bkv, Hkv, S_rank, D | Dv], contiguous; out, lse: results for the rank's rows
  // (lse optional here, required by ring_backward). block_mask is ignored: pieces use piece_masks.
  ForwardArgs local;
  const ShardPlan* plan = nullptr;
  int rank = 0;
  Communicator* comm = nullptr;
  // piece_masks[q_chunk * n_chunks + kv_chunk]: slice_blocks(bm, ...) of that piece on the device
  // (only the rank's pieces are read). Null: no block mask (mask_mod on every tile).
  const DeviceBlockMask* piece_masks = nullptr;
  void* workspace = nullptr;  // ring_forward_workspace_bytes, 256-byte aligned
  size_t workspace_bytes = 0;
};
// Two shard buffers, fp32 running out/lse of the rank's rows, one piece's partial out/lse.
size_t ring_forward_workspace_bytes(const RingForwardArgs& args);
void ring_forward(const RingForwardArgs& args);

struct RingBackwardArgs {
  RingForwardArgs fwd;          // local.out and local.lse: what ring_forward produced
  TensorView dout;              // the rank's rows
  const float* dlse = nullptr;  // optional, the rank's rows
  TensorView dq, dk, dv;        // dq: the rank's rows; dk, dv: its shard
  void* workspace = nullptr;    // ring_backward_workspace_bytes, 256-byte aligned
  size_t workspace_bytes = 0;
};
// Two shard buffers and two fp32 dk/dv accumulator buffers (they travel), fp32 dq, one piece's
// scratch, and cuda_backward's own workspace for the largest piece.
size_t ring_backward_workspace_bytes(const RingBackwardArgs& args);
void ring_backward(const RingBackwardArgs& args);

}  // namespace flexattn::cp
