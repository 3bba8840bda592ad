#pragma once
// Split counters of the decode family's last-CTA merge (FLEXATTN_DECODE_MERGE; kernels/decode/attn_decode.cuh
// decode_merge_last): one unsigned per row tile of a launch, 0 when the launch starts; each split's CTA bumps its
// tile's counter with atomicInc wrapping at num_splits - 1, so the last one to finish sees num_splits - 1, merges
// the tile's partials (no combine kernel), and the counter is 0 again for the next launch -- no memset, no host
// sync per call. Counters must never be shared by two launches that can run at the same time, so:
//  - eager launches: one array per (device, stream) (per host thread for CU_STREAM_PER_THREAD), grown (a new
//    zeroed array; the old one kept, never freed: a launch may still be using it) when a launch needs more;
//  - launches captured into a CUDA graph get none: the launch then writes partials for the combine kernel as
//    before (a replay could otherwise overlap eager launches on another stream).
// Arrays are allocated and zeroed on first need (a legacy-stream memset and a wait for it: the only host sync).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

namespace flexattn::runtime {

class SplitCounterPool {
 public:
  // alloc(bytes) returns zeroed device memory (0 when it cannot allocate); host tests pass a fake.
  explicit SplitCounterPool(std::function<uintptr_t(size_t)> alloc) : alloc_(std::move(alloc)) {}

  // At least `count` zeroed counters for a launch on `stream` of `device`, or null (capturing, or no memory).
  unsigned* counters(int device, void* stream, size_t count, bool capturing, bool per_thread);

  // Arrays allocated so far (the retired ones included).
  size_t arrays() const;

 private:
  struct Slot {
    uintptr_t ptr = 0;
    size_t count = 0;
  };
  std::function<uintptr_t(size_t)> alloc_;
  mutable std::mutex mu_;
  std::map<std::tuple<int, uintptr_t, std::thread::id>, Slot> live_;
  size_t arrays_ = 0;
};

// The counters of a decode launch with `count` row tiles on `stream`, or null (then the combine kernel merges).
unsigned* decode_split_counters(int device, void* stream, size_t count);

}  // namespace flexattn::runtime
