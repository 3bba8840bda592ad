#pragma once
// Tile-queue words of the persistent sm90 forward (kernels/sm90/fwd_scheduler_sm90.cuh, "Queue word").
// A launch takes its work tiles from one unsigned in device memory that is 0 when the launch starts and
// that the launch leaves at 0 (its last atomicAdd stores 0 back), so no memset and no host sync are
// needed. A word must never be shared by two launches that can run at the same time, or they would
// split the tiles between them. So:
//  - eager launches: one word per (device, stream) for the process's life (launches on one stream are
//    ordered); the per-thread default stream (CU_STREAM_PER_THREAD) counts once per host thread;
//  - launches captured into a CUDA graph: a fresh word per capture, never reused (replays of one graph
//    exec are ordered; a graph instantiated twice and replayed concurrently on two streams would share
//    it: don't, or set FLEXATTN_SM90_TILE_QUEUE=0);
//  - a capture that needs a word when none is left (no allocation during a capture) gets none: the
//    launch uses the static stride (null queue), which is always correct.
// Words come from chunks of kWordsPerChunk allocated and zeroed (a legacy-stream memset and a wait for
// it: the only host sync, once per chunk) on first need, never freed (a graph may still point at them). A stream handle that is destroyed and reused by a new stream keeps its word:
// work still pending on the old stream and the new stream's launch could then overlap (as with the
// decode hook's workspace, runtime/decode_cuda.cc).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

namespace flexattn::runtime {

class TileQueuePool {
 public:
  static constexpr int kWordsPerChunk = 1024;
  // alloc(bytes) returns zeroed device memory (0 when it cannot allocate); host tests pass a fake.
  explicit TileQueuePool(std::function<uintptr_t(size_t)> alloc) : alloc_(std::move(alloc)) {}

  // The word for a launch on `stream` of `device`; `capturing`: the stream is being captured;
  // `per_thread`: the stream is CU_STREAM_PER_THREAD (keyed by the calling thread too). Null: none to
  // be had (the launch takes the static stride).
  unsigned* word(int device, void* stream, bool capturing, bool per_thread);

  size_t chunks(int device) const;

 private:
  struct Device {
    std::vector<uintptr_t> chunks;
    int used = kWordsPerChunk;  // words taken from the last chunk
  };
  unsigned* take(Device& d, bool may_allocate);

  std::function<uintptr_t(size_t)> alloc_;
  mutable std::mutex mu_;
  std::map<int, Device> devices_;
  std::map<std::tuple<int, uintptr_t, std::thread::id>, unsigned*> eager_;
};

// FLEXATTN_SM90_TILE_QUEUE (default on; read on every launch): the persistent forward's tile-queue
// word for this launch, or null for the static stride (flag off, or no word during a capture).
unsigned* sm90_tile_queue(int device, void* stream);

// CTAs of the persistent forward: sm_count (one per SM: its shared memory allows no second), or
// FLEXATTN_SM90_PERSISTENT_CTAS when that is a positive number below it (a testing knob: a few CTAs
// make every CTA take many tiles from the queue even on the small shapes of gpu_attention_check).
int sm90_persistent_ctas(int sm_count);

}  // namespace flexattn::runtime
