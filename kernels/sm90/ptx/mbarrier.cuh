#pragma once
// mbarrier (sm_90): 64-bit transaction barriers in shared memory, addressed by shared-window address.
//
// Phase rule used by every pipeline here: a fresh barrier is in phase 0, and waiting on parity 1
// returns at once (it reads as "the phase before" completed). So a producer waits on its *empty*
// barriers with parity (phase ^ 1) starting from phase 0, and a consumer waits on *full* barriers
// with parity phase; both flip phase each time their stage index wraps around the ring.
namespace flexattn::kern::sm90 {

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

// Arrival (release semantics at CTA scope: prior shared writes are visible to a thread whose wait
// observes the completed phase).
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// Arrival that also announces `bytes` of asynchronous (TMA) traffic the phase must wait for. TMA
// credits the full box bytes even where the box is clipped by the tensor bounds (zero fill).
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// The same announcement without an arrival (the thread arrives later, after writes its arrival must release).
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(unsigned bar, unsigned parity) {
  unsigned ok;
  asm volatile(
      "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}

// Non-blocking: whether the phase with the given parity has completed (acquire semantics when true).
__device__ __forceinline__ bool mbar_test_wait(unsigned bar, unsigned parity) {
  unsigned ok;
  asm volatile(
      "{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}

// Blocks until the phase with the given parity has completed (acquire semantics at CTA scope).
// try_wait itself suspends the thread for a hardware-chosen time, so the loop does not spin hot.
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

}  // namespace flexattn::kern::sm90
