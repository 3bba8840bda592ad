#pragma once
// Fences and named barriers (sm_90). Named barrier ids are owned by the kernel that uses them
// (attn_fwd_sm90.cuh keeps the id map); id 0 is __syncthreads.
namespace flexattn::kern::sm90 {

// Generic-proxy shared writes (st.shared) become visible to the async proxy (TMA store, wgmma) only
// after this fence in each writing thread, followed by a barrier among the writers.
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Makes mbarrier.init visible to the async proxy (TMA complete_tx) and to other threads; the only
// form PTX offers is cluster-scoped, which covers the CTA.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// bar.sync / bar.arrive on a named barrier; n (threads) is a multiple of 32, the same on every use.
__device__ __forceinline__ void named_bar_sync(int id, int n) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int n) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory");
}

}  // namespace flexattn::kern::sm90
