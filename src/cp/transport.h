#pragma once
// What the ring needs from a communication library: point-to-point byte transfers between ranks,
// grouped like NCCL's ncclGroupStart/End, and a way to wait for them. Two implementations: NCCL
// (nccl_transport.cc, stream-ordered on a GPU) and in-process threads (InProcessHub, for tests).
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

namespace flexattn::cp {

// Contract (NCCL's): send/recv are only posted between group_start and group_end; group_end starts
// them. Until wait() returns (for a GPU transport: until work ordered after wait() runs), a posted send
// buffer may still be read and a posted recv buffer may be written at any moment, so the caller must
// neither write the one nor read the other. Messages between one pair of ranks match in posting order
// and a recv must name exactly the byte count of its send.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual void group_start() = 0;
  virtual void group_end() = 0;
  virtual void send(const void* buffer, size_t bytes, int peer) = 0;
  virtual void recv(void* buffer, size_t bytes, int peer) = 0;
  virtual void wait() = 0;
};

// N ranks as N threads of one process. Sends are read when the sender calls wait() and recv buffers
// are poisoned (0xFF bytes: NaN doubles) at group_end and filled at wait(), so an executor that
// touches a buffer in flight computes garbage instead of passing by luck.
class InProcessHub {
 public:
  // A recv that waits longer than `timeout_s` throws: a schedule bug becomes an error, not a hang.
  explicit InProcessHub(int world_size, double timeout_s = 60.0);
  ~InProcessHub();
  Transport& transport(int rank);
  // Wakes every waiting rank with an error: call it when one rank's thread fails.
  void abort();
  int64_t messages_sent(int rank) const;
  int64_t bytes_sent(int rank) const;

  struct Shared;  // queues, lock, counters

 private:
  std::unique_ptr<Shared> shared_;
  std::vector<std::unique_ptr<Transport>> ranks_;
};

}  // namespace flexattn::cp
