#pragma once
// Cache prefetch hints (sm_90): no register result, so a thread can start the global reads of a later
// dependent chain early without holding registers for them. Callers pass addresses inside an allocation.
namespace flexattn::kern::sm90 {

__device__ __forceinline__ void prefetch_l1(const void* p) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
}

}  // namespace flexattn::kern::sm90
