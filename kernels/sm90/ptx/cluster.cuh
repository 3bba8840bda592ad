#pragma once
// Thread-block clusters (sm_90): the CTA's rank, the cluster barrier, and loads from a peer CTA's shared
// memory (distributed shared memory). A shared::cta address of this CTA names the same bytes in every
// CTA of the cluster; mapa turns it into the shared::cluster address of one peer's copy, which
// ld.shared::cluster reads. Callers compile these for sm_90+ only.
namespace flexattn::kern::sm90 {

// This CTA's rank in its cluster (0 .. cluster_nctarank() - 1) and the cluster's CTA count (1 when the
// grid was launched without a cluster).
__device__ __forceinline__ unsigned cluster_ctarank() {
  unsigned r;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ unsigned cluster_nctarank() {
  unsigned r;
  asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return r;
}

// Cluster barrier, split into arrive and wait; every thread of every CTA of the cluster arrives once per
// phase (.aligned: all threads of a warp execute it together). arrive.release orders this thread's
// earlier memory accesses (shared included) before a peer's accesses after its wait.acquire.
__device__ __forceinline__ void cluster_arrive_release() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
// No ordering, only the count: e.g. "this CTA's reads of its peers are done" before they exit.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait_acquire() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The shared::cluster address of the bytes at shared::cta address addr in the CTA of rank `rank` (pure:
// the compiler may hoist it; the loads that use it are ordered by their own asm volatile).
__device__ __forceinline__ unsigned mapa_shared(unsigned addr, unsigned rank) {
  unsigned r;
  asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}

// Loads from a shared::cluster address (mapa_shared); 8- / 16-byte aligned.
__device__ __forceinline__ float2 ld_shared_cluster_f32x2(unsigned addr) {
  float2 v;
  asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ float4 ld_shared_cluster_f32x4(unsigned addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

}  // namespace flexattn::kern::sm90
