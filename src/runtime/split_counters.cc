// Split counters of the decode family's last-CTA merge: see split_counters.h.
#include "runtime/split_counters.h"

#include <algorithm>
#include <memory>

#include "jit/device.h"
#include "jit/driver_api.h"

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
  const uintptr_t p = alloc_(grown * sizeof(unsigned));
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
  // Never destroyed: freeing at exit could run after the context is gone (e.g. torch's teardown).
  static auto* pool = new SplitCounterPool([](size_t bytes) -> uintptr_t {
    try {
      auto b = std::make_unique<jit::DeviceBuffer>(bytes);  // in the current context (the launch's device)
      // cuMemsetD8 runs on the legacy stream and may return before it is done; the launch's stream may be
      // non-blocking: wait for the zeros before any launch can use the counters. Once per array, never per call.
      b->zero();
      jit::cu_check(jit::driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
      return b.release()->ptr();  // never freed (see the header)
    } catch (const std::exception&) {
      return 0;  // none: this launch leaves the merge to the combine kernel
    }
  });
  const jit::DriverApi& d = jit::driver();
  int capturing = jit::CU_STREAM_CAPTURE_STATUS_NONE;
  const bool can_ask = d.cuStreamIsCapturing != nullptr &&
                       d.cuStreamIsCapturing(static_cast<jit::CUstream>(stream), &capturing) == jit::CUDA_SUCCESS;
  // Unknown capture state: treat as capturing (no counters: the combine kernel).
  const bool captured = !can_ask || capturing != jit::CU_STREAM_CAPTURE_STATUS_NONE;
  constexpr uintptr_t kPerThreadStream = 0x2;  // CU_STREAM_PER_THREAD
  return pool->counters(device, stream, count, captured, reinterpret_cast<uintptr_t>(stream) == kPerThreadStream);
}

}  // namespace flexattn::runtime
