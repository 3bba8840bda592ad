#pragma once
// sm_90 bulk copies for the decode K/V ring (FLEXATTN_DECODE_BULK=1; attn_decode.cuh): one
// cp.async.bulk per K or V row (256 B at D = 128) into the padded shared-memory row, completing on the
// ring stage's mbarrier, instead of D / 8 16-byte cp.async per row; the copy engine then tracks the bytes
// in flight. Decode-local wrappers (the sm90 family has its own). Declared for every arch, since the
// callers are discarded `if constexpr` branches below sm_90; the PTX exists only for sm_90+.
#include "decode/decode_config.h"

namespace flexattn::kern {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FLEXATTN_DECODE_SM90 1
#else
#define FLEXATTN_DECODE_SM90 0
#endif

__device__ __forceinline__ void decode_mbar_init(unsigned bar, unsigned count) {
#if FLEXATTN_DECODE_SM90
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
#endif
}
// Makes the initialised barriers visible to the async proxy (before the CTA barrier that follows).
__device__ __forceinline__ void decode_mbar_fence_init() {
#if FLEXATTN_DECODE_SM90
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
// This thread's arrival on the current phase, announcing the bytes it is about to have copied.
__device__ __forceinline__ void decode_mbar_arrive_tx(unsigned bar, unsigned tx) {
#if FLEXATTN_DECODE_SM90
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(tx) : "memory");
#endif
}
__device__ __forceinline__ void decode_mbar_wait(unsigned bar, unsigned parity) {
#if FLEXATTN_DECODE_SM90
  asm volatile(
      "{\n"
      ".reg .pred P1;\n"
      "DECODE_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      "@!P1 bra DECODE_WAIT;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}
// The L2 policy of the K / V loads under FLEXATTN_DECODE_EVICT_FIRST (decode_config.h says why): evict_first where
// each K / V byte is read by one CTA of the launch (p.kv_read_once), else evict_normal: K / V read again by the CTAs
// of other query heads, row tiles or batches would come back from DRAM if its lines were the first victims.
__device__ __forceinline__ unsigned long long decode_l2_policy(bool evict_first) {
  unsigned long long policy = 0;
#if FLEXATTN_DECODE_SM90
  if (evict_first) {
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  } else {
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(policy));
  }
#endif
  return policy;
}
// policy: decode_l2_policy's, read only with FLEXATTN_DECODE_EVICT_FIRST.
__device__ __forceinline__ void decode_bulk_copy(unsigned dst, const void* src, unsigned bytes, unsigned bar,
                                                 unsigned long long policy) {
#if FLEXATTN_DECODE_SM90 && FLEXATTN_DECODE_EVICT_FIRST
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          dst),
      "l"(src), "r"(bytes), "r"(bar), "l"(policy)
      : "memory");
#elif FLEXATTN_DECODE_SM90
  (void)policy;
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
#else
  (void)policy;
#endif
}
// Asks for bytes from src into L2 (no completion, no shared memory): the bulk ring's prefetch of the tile
// after the ring's last (FLEXATTN_DECODE_PREFETCH).
__device__ __forceinline__ void decode_bulk_prefetch_l2(const void* src, unsigned bytes) {
#if FLEXATTN_DECODE_SM90
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
#endif
}
// Zeroes 16 bytes of shared memory (a row the ring does not copy: its V rows must not be garbage under P = 0).
__device__ __forceinline__ void decode_zero_16(unsigned dst) {
#if FLEXATTN_DECODE_SM90
  asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(dst), "r"(0) : "memory");
#endif
}
// Orders this thread's generic shared-memory writes (zeroed rows) before later async-proxy writes
// (bulk copies) to the same bytes.
__device__ __forceinline__ void decode_fence_proxy_async() {
#if FLEXATTN_DECODE_SM90
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

#undef FLEXATTN_DECODE_SM90

}  // namespace flexattn::kern
