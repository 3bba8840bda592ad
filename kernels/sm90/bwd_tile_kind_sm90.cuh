#pragma once
// The sm90 backward's tile kinds, chosen once per 64 x 64 tile for its element-wise step.
//   interior full    (inb && full): no bounds test, no index wrapping, no mask_mod;
//   interior partial (inb): mask_mod only (kPartialInB; without it these take the edge path);
//   edge full        (full): bounds and wrapping, no mask_mod (!kMergeEdges; with it the edge copy below);
//   edge             : bounds, wrapping and mask_mod, the mask a run-time choice (mask_on = !full).
// Each kind is its own instantiation of the step, so each kind that exists costs code size and compile time; the two
// switches drop kinds where the consumer's register budget cannot afford them (the callers say which budget). Every
// consumer goes through this one function, so that a kind's rule changes in one place.
namespace flexattn::kern::sm90 {

// Step::template run<kFull, kInB>(mask_on, args...) for the tile's kind. Step is a struct with a static member
// template, not a generic lambda: NVRTC 13.0 takes a generic lambda's operator() for a host function, even inside
// device code ("host functions are not allowed in JIT mode"), and __device__ on it needs --extended-lambda.
template <bool kPartialInB, bool kMergeEdges, class Step, class... A>
__device__ __forceinline__ void dispatch_tile_kind(bool inb, bool full, A&&... args) {
  if (inb && full)
    Step::template run<true, true>(true, static_cast<A&&>(args)...);
  else if (kPartialInB && inb)
    Step::template run<false, true>(true, static_cast<A&&>(args)...);
  else if (!kMergeEdges && full)
    Step::template run<true, false>(true, static_cast<A&&>(args)...);
  else
    Step::template run<false, false>(!full, static_cast<A&&>(args)...);
}

}  // namespace flexattn::kern::sm90

// FLEXATTN_TILE_KIND_STEP(Name, fn): struct Name<V>, the dispatch_tile_kind step that calls
// fn<V, kFull, kInB>(args..., mask_on).
#define FLEXATTN_TILE_KIND_STEP(NAME, FN)                                \
  template <class V>                                                     \
  struct NAME {                                                          \
    template <bool kFull, bool kInB, class... A>                         \
    __device__ __forceinline__ static void run(bool mask_on, A&&... args) { \
      FN<V, kFull, kInB>(static_cast<A&&>(args)..., mask_on);            \
    }                                                                    \
  };
