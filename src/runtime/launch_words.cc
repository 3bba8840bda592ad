// Launch-owned counters' memory and stream facts: see launch_words.h.
#include "runtime/launch_words.h"

#include <exception>
#include <memory>

#include "jit/device.h"
#include "jit/driver_api.h"

namespace flexattn::runtime {

namespace {

// The allocation both forms share; zero(buffer) clears it (throws on failure).
template <class Zero>
uintptr_t alloc_forever(size_t bytes, Zero zero) {
  try {
    auto b = std::make_unique<jit::DeviceBuffer>(bytes);  // in the current context (the launch's device)
    zero(*b);
    return b.release()->ptr();
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

uintptr_t alloc_zeroed_forever(size_t bytes) {
  return alloc_forever(bytes, [](jit::DeviceBuffer& b) {
    b.zero();
    jit::cu_check(jit::driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
  });
}

uintptr_t alloc_zeroed_forever_on(size_t bytes, void* stream) {
  return alloc_forever(bytes, [&](jit::DeviceBuffer& b) {
    jit::cu_check(jit::driver().cuMemsetD8Async(b.ptr(), 0, b.size(), static_cast<jit::CUstream>(stream)),
                  "cuMemsetD8Async");
  });
}

bool stream_maybe_capturing(void* stream) {
  const jit::DriverApi& d = jit::driver();
  int capturing = jit::CU_STREAM_CAPTURE_STATUS_NONE;
  const bool can_ask = d.cuStreamIsCapturing != nullptr &&
                       d.cuStreamIsCapturing(static_cast<jit::CUstream>(stream), &capturing) == jit::CUDA_SUCCESS;
  return !can_ask || capturing != jit::CU_STREAM_CAPTURE_STATUS_NONE;
}

}  // namespace flexattn::runtime
