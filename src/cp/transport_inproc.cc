// InProcessHub: the ring's transport for tests, N ranks as N threads.
#include <chrono>
#include <cstring>
#include <sstream>
#include <string>

#include "cp/transport.h"
#include "flexattn/error.h"

namespace flexattn::cp {

struct InProcessHub::Shared {
  int n = 0;
  double timeout_s = 60;
  std::mutex mu;
  std::condition_variable cv;
  bool aborted = false;
  std::vector<std::deque<std::vector<char>>> queues;  // [src * n + dst]
  std::vector<int64_t> messages, bytes;               // per sender
};

namespace {

const std::string kWho = "in-process transport: ";

class InProcessTransport : public Transport {
 public:
  InProcessTransport(InProcessHub::Shared* s, int rank) : s_(s), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return s_->n; }

  void group_start() override {
    check(!in_group_, kWho + "rank " + std::to_string(rank_) + " called group_start twice without group_end");
    in_group_ = true;
  }
  void group_end() override {
    check(in_group_, kWho + "rank " + std::to_string(rank_) + " called group_end without group_start");
    in_group_ = false;
    for (const Op& op : ops_)
      if (!op.is_send && !op.started) std::memset(op.recv_buffer, 0xFF, op.bytes);
    for (Op& op : ops_) op.started = true;
  }
  void send(const void* buffer, size_t bytes, int peer) override { post({true, buffer, nullptr, bytes, peer}); }
  void recv(void* buffer, size_t bytes, int peer) override { post({false, nullptr, buffer, bytes, peer}); }

  void wait() override {
    check(!in_group_, kWho + "rank " + std::to_string(rank_) + " called wait inside a group");
    std::unique_lock<std::mutex> lock(s_->mu);
    // Every send first, so ranks exchanging with each other cannot wait on one another.
    for (const Op& op : ops_) {
      if (!op.is_send) continue;
      const char* p = static_cast<const char*>(op.send_buffer);
      s_->queues[size_t(rank_ * s_->n + op.peer)].emplace_back(p, p + op.bytes);
      s_->messages[size_t(rank_)] += 1;
      s_->bytes[size_t(rank_)] += int64_t(op.bytes);
    }
    s_->cv.notify_all();
    for (const Op& op : ops_) {
      if (op.is_send) continue;
      auto& q = s_->queues[size_t(op.peer * s_->n + rank_)];
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(s_->timeout_s);
      const bool ready = s_->cv.wait_until(lock, deadline, [&] { return s_->aborted || !q.empty(); });
      check(!s_->aborted, kWho + "aborted while rank " + std::to_string(rank_) + " waited for rank " +
                              std::to_string(op.peer) + " (another rank failed)");
      std::ostringstream waited;
      waited << s_->timeout_s;
      check(ready, kWho + "rank " + std::to_string(rank_) + " waited " + waited.str() + " s for " +
                       std::to_string(op.bytes) + " bytes from rank " + std::to_string(op.peer) +
                       " that never came (the ranks' schedules disagree)");
      check(q.front().size() == op.bytes, kWho + "rank " + std::to_string(rank_) + " expected " +
                                              std::to_string(op.bytes) + " bytes from rank " + std::to_string(op.peer) +
                                              " but the message holds " + std::to_string(q.front().size()));
      std::memcpy(op.recv_buffer, q.front().data(), op.bytes);
      q.pop_front();
    }
    ops_.clear();
  }

 private:
  struct Op {
    bool is_send;
    const void* send_buffer;
    void* recv_buffer;
    size_t bytes;
    int peer;
    bool started = false;
  };
  void post(Op op) {
    const char* what = op.is_send ? "send" : "recv";
    check(in_group_, kWho + "rank " + std::to_string(rank_) + " posted a " + what + " outside group_start/group_end");
    check(0 <= op.peer && op.peer < s_->n && op.peer != rank_,
          kWho + "rank " + std::to_string(rank_) + " posted a " + what + " to peer " + std::to_string(op.peer) +
              "; peers are the other ranks of [0, " + std::to_string(s_->n) + ")");
    ops_.push_back(op);
  }

  InProcessHub::Shared* s_;
  int rank_;
  bool in_group_ = false;
  std::vector<Op> ops_;
};

}  // namespace

InProcessHub::InProcessHub(int world_size, double timeout_s) : shared_(std::make_unique<Shared>()) {
  check(world_size >= 1, kWho + "world_size must be >= 1; got " + std::to_string(world_size));
  shared_->n = world_size;
  shared_->timeout_s = timeout_s;
  shared_->queues.resize(size_t(world_size * world_size));
  shared_->messages.assign(size_t(world_size), 0);
  shared_->bytes.assign(size_t(world_size), 0);
  for (int r = 0; r < world_size; ++r) ranks_.push_back(std::make_unique<InProcessTransport>(shared_.get(), r));
}

InProcessHub::~InProcessHub() = default;

Transport& InProcessHub::transport(int rank) {
  check(0 <= rank && rank < shared_->n,
        kWho + "rank must be in [0, " + std::to_string(shared_->n) + "); got " + std::to_string(rank));
  return *ranks_[size_t(rank)];
}

void InProcessHub::abort() {
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->aborted = true;
  shared_->cv.notify_all();
}

int64_t InProcessHub::messages_sent(int rank) const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return shared_->messages.at(size_t(rank));
}

int64_t InProcessHub::bytes_sent(int rank) const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return shared_->bytes.at(size_t(rank));
}

}  // namespace flexattn::cp
