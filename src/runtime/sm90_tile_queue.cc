// Tile-queue words of the persistent sm90 forward: see sm90_tile_queue.h.
#include "runtime/sm90_tile_queue.h"

#include <cstdlib>

#include "jit/sys.h"
#include "runtime/launch_words.h"

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
  // Never destroyed: freeing at exit could run after the context is gone (e.g. torch's teardown). No memory: no
  // word, the launch takes the static stride. Zeroed once per 1024 words, never per launch.
  static auto* pool = new TileQueuePool(alloc_zeroed_forever);
  // Unknown capture state counts as capturing (no allocation, a fresh word or the static stride).
  return pool->word(device, stream, stream_maybe_capturing(stream), is_per_thread_stream(stream));
}

int sm90_persistent_ctas(int sm_count) {
  const int cap = std::atoi(jit::env_or("FLEXATTN_SM90_PERSISTENT_CTAS", "0").c_str());
  return cap > 0 && cap < sm_count ? cap : sm_count;
}

}  // namespace flexattn::runtime
