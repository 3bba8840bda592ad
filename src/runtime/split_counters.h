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
// Arrays are allocated on first need and zeroed by a memset on the launch's own stream, ordered before the launch
// (no host sync, nothing on the legacy stream). A counter that does not start a launch at 0 stays off for every
// later launch on its array (the wrong CTA would merge): that takes two launches sharing an array at once -- a
// stream handle destroyed with work pending and reused, or a host thread's id reused for the per-thread default
// stream while the old thread's launches still run -- or a launch killed by a fault (the context is lost then).
// Only calls of at most kern::kDecodeMergeMaxSplits splits take counters (decode_config.h).
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
  // alloc(bytes, stream) returns device memory that is zero for work ordered after it on `stream` (0 when it cannot
  // allocate); host tests pass a fake.
  explicit SplitCounterPool(std::function<uintptr_t(size_t, void*)> alloc) : alloc_(std::move(alloc)) {}

  // At least `count` zeroed counters for a launch on `stream` of `device`, or null (capturing, or no memory).
  unsigned* counters(int device, void* stream, size_t count, bool capturing, bool per_thread);

  // Arrays allocated so far (the retired ones included).
  size_t arrays() const;

 private:
  struct Slot {
    uintptr_t ptr = 0;
    size_t count = 0;
  };
  std::function<uintptr_t(size_t, void*)> alloc_;
  mutable std::mutex mu_;
  std::map<std::tuple<int, uintptr_t, std::thread::id>, Slot> live_;
  size_t arrays_ = 0;
};

// The counters of a decode launch with `count` row tiles on `stream`, or null (then the combine kernel merges).
unsigned* decode_split_counters(int device, void* stream, size_t count);

}  // namespace flexattn::runtime
