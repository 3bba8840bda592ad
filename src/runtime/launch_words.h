#pragma once
// What the launch-owned counter pools share (the sm90 forward's tile-queue words, sm90_tile_queue.h; the decode
// family's split counters, split_counters.h): device memory that is zero when first handed out and never freed,
// and what a stream handle says about how its launches may overlap.
#include <cstddef>
#include <cstdint>

namespace flexattn::runtime {

// `bytes` of zeroed device memory in the current context, never freed (a captured graph may still point at it;
// freeing at exit could run after the context is gone); 0 when it cannot be had. The memset runs on the legacy
// stream and may return before it is done, while a launch's stream may be non-blocking: this waits for the zeros
// (the pools' only host sync, once per allocation). For memory that launches on several streams use.
uintptr_t alloc_zeroed_forever(size_t bytes);
// The same for memory only launches on `stream` use: zeroed by a memset on that stream, ordered before them (no
// host sync, nothing on the legacy stream).
uintptr_t alloc_zeroed_forever_on(size_t bytes, void* stream);

// The stream is being captured into a graph, or its state is unknown (then treated as captured: no allocation).
bool stream_maybe_capturing(void* stream);

// The handle is CU_STREAM_PER_THREAD: one stream per host thread behind one handle.
inline bool is_per_thread_stream(void* stream) { return reinterpret_cast<uintptr_t>(stream) == 0x2; }

}  // namespace flexattn::runtime
