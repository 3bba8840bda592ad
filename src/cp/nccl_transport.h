#pragma once
// The ring's Transport over NCCL, stream-ordered: sends and receives run on the communicator's stream,
// after the compute stream's work so far (a recv may overwrite a buffer the last step read); wait()
// makes the compute stream wait for them. Nothing blocks the host.
#include "cp/nccl_api.h"
#include "cp/transport.h"
#include "flexattn/cp_nccl.h"
#include "jit/device.h"

namespace flexattn::cp {

struct Communicator::Impl {
  ncclComm_t comm = nullptr;
  int rank = 0, world_size = 1, device = 0;
  std::unique_ptr<jit::Stream> stream;  // communication stream
  jit::CUevent compute_done = nullptr;  // recorded on the compute stream before each group
  jit::CUevent comm_done = nullptr;     // recorded on the communication stream by wait()
  ~Impl();
};

class NcclTransport : public Transport {
 public:
  // `compute` is the caller's stream (ForwardArgs::stream); the device's context must be current.
  NcclTransport(Communicator& comm, jit::CUstream compute);
  int rank() const override { return c_.rank; }
  int world_size() const override { return c_.world_size; }
  void group_start() override;
  void group_end() override;
  void send(const void* buffer, size_t bytes, int peer) override;
  void recv(void* buffer, size_t bytes, int peer) override;
  void wait() override;

 private:
  Communicator::Impl& c_;
  const NcclApi& api_;
  jit::CUstream compute_;
};

}  // namespace flexattn::cp
