// Split counters of the decode family's last-CTA merge: see split_counters.h.
#include "runtime/split_counters.h"

#include <algorithm>

#include "runtime/launch_words.h"

namespace flexattn::runtime {

unsigned* SplitCounterPool::counters(int device, void* stream, size_t count, bool capturing, bool per_thread) {
  if (capturing || count == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  const auto key = std::make_tuple(device, reinterpret_cast<uintptr_t>(stream),
                                   per_thread ? std::this_thread::get_id() : std::thread::id());
  Slot& slot = live_[key];
  if (slot.ptr != 0 && slot.count >= count) return reinterpret_cast<unsigned*>(slot.ptr);
  // Grown by doubling, so a growing batch retires few arrays; the old one stays allocated (see the header).
  const size_t grown = std::max(count, 2 * slot.count);
  const uintptr_t p = alloc_(grown * sizeof(unsigned), stream);
  if (p == 0) return nullptr;
  ++arrays_;
  slot = Slot{p, grown};
  return reinterpret_cast<unsigned*>(p);
}

size_t SplitCounterPool::arrays() const {
  std::lock_guard<std::mutex> lock(mu_);
  return arrays_;
}

unsigned* decode_split_counters(int device, void* stream, size_t count) {
  // Never destroyed (see the header); no memory: no counters, the combine kernel merges.
  static auto* pool = new SplitCounterPool(alloc_zeroed_forever_on);
  // Unknown capture state counts as capturing (no counters: the combine kernel).
  return pool->counters(device, stream, count, stream_maybe_capturing(stream), is_per_thread_stream(stream));
}

}  // namespace flexattn::runtime
