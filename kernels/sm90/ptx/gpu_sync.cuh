#pragma once
// GPU-scope acquire / release on global words and the global timer (sm_70+; used by sm_90 kernels): the
// ordered dQ reductions of the deterministic backward (sm90/bwd_dq_order_sm90.cuh) hand a semaphore from
// CTA to CTA with them.
namespace flexattn::kern::sm90 {

__device__ __forceinline__ int ld_acquire_gpu_s32(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void red_release_gpu_add_s32(int* p, int v) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ int ld_relaxed_gpu_s32(const int* p) {
  int v;
  asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void st_relaxed_gpu_s32(int* p, int v) {
  asm volatile("st.relaxed.gpu.global.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Nanoseconds of the GPU's global timer (%globaltimer; its resolution is about a microsecond).
__device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Orders this thread's global accesses of the async proxy (TMA / bulk reductions) against its generic ones
// (the semaphore's acquire / release), in both directions.
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }

// Waits until this thread's committed bulk (TMA) writes have completed in global memory, then adds 1 to `word` with
// release semantics: a thread that acquires the new value (and fences the async proxy) sees the writes. The hand-off of
// the ordered dQ reductions (bwd_dq_order_sm90.cuh) and of a claimed dQ tile (bwd_dq_claim_sm90.cuh).
__device__ __forceinline__ void release_after_bulk_writes(int* word) {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  fence_proxy_async_global();
  red_release_gpu_add_s32(word, 1);
}

}  // namespace flexattn::kern::sm90
