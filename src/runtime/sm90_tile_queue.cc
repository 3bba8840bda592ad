// Tile-queue words of the persistent sm90 forward: see sm90_tile_queue.h.
#include "runtime/sm90_tile_queue.h"

#include <cstdlib>
#include <memory>

#include "jit/device.h"
#include "jit/driver_api.h"
#include "jit/sys.h"

namespace flexattn::runtime {

unsigned* TileQueuePool::take(Device& d, bool may_allocate) {
  if (d.used == kWordsPerChunk) {
    if (!may_allocate) return nullptr;
    const uintptr_t chunk = alloc_(kWordsPerChunk * sizeof(unsigned));
    if (chunk == 0) return nullptr;
    d.chunks.push_back(chunk);
    d.used = 0;
  }
  return reinterpret_cast<unsigned*>(d.chunks.back()) + d.used++;
}

unsigned* TileQueuePool::word(int device, void* stream, bool capturing, bool per_thread) {
  std::lock_guard<std::mutex> lock(mu_);
  Device& d = devices_[device];
  if (capturing) return take(d, false);  // its own word: replays may overlap eager launches on the stream
  const auto key = std::make_tuple(device, reinterpret_cast<uintptr_t>(stream),
                                   per_thread ? std::this_thread::get_id() : std::thread::id());
  auto it = eager_.find(key);
  if (it != eager_.end()) return it->second;
  unsigned* w = take(d, true);
  if (w != nullptr) eager_.emplace(key, w);
  return w;
}

size_t TileQueuePool::chunks(int device) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = devices_.find(device);
  return it == devices_.end() ? 0 : it->second.chunks.size();
}

unsigned* sm90_tile_queue(int device, void* stream) {
  if (!jit::env_flag("FLEXATTN_SM90_TILE_QUEUE", true)) return nullptr;
  // Never destroyed: freeing at exit could run after the context is gone (e.g. torch's teardown).
  static auto* pool = new TileQueuePool([](size_t bytes) -> uintptr_t {
    try {
      auto b = std::make_unique<jit::DeviceBuffer>(bytes);  // in the current context (the launch's device)
      // cuMemsetD8 runs on the legacy stream and may return before it is done; the launch's stream may
      // be non-blocking (not ordered after the legacy stream): wait for the zeros before any launch can
      // use a word. Once per 1024 words, never per launch.
      b->zero();
      jit::cu_check(jit::driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
      return b.release()->ptr();  // never freed (see the header)
    } catch (const std::exception&) {
      return 0;  // no word: this launch takes the static stride
    }
  });
  const jit::DriverApi& d = jit::driver();
  int capturing = jit::CU_STREAM_CAPTURE_STATUS_NONE;
  const bool can_ask = d.cuStreamIsCapturing != nullptr &&
                       d.cuStreamIsCapturing(static_cast<jit::CUstream>(stream), &capturing) == jit::CUDA_SUCCESS;
  // Unknown capture state: treat as capturing (no allocation, a fresh word or the static stride).
  const bool captured = !can_ask || capturing != jit::CU_STREAM_CAPTURE_STATUS_NONE;
  constexpr uintptr_t kPerThreadStream = 0x2;  // CU_STREAM_PER_THREAD
  return pool->word(device, stream, captured, reinterpret_cast<uintptr_t>(stream) == kPerThreadStream);
}

int sm90_persistent_ctas(int sm_count) {
  const int cap = std::atoi(jit::env_or("FLEXATTN_SM90_PERSISTENT_CTAS", "0").c_str());
  return cap > 0 && cap < sm_count ? cap : sm_count;
}

}  // namespace flexattn::runtime
