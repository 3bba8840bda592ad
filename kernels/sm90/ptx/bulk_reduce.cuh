#pragma once
// Bulk (non-tensor) asynchronous reduction, shared -> global (sm_90): cp.reduce.async.bulk with the
// bulk_group completion mechanism. One instruction moves `bytes` contiguous bytes of shared memory and
// adds them element-wise (f32) into contiguous global memory; the engine performs the read-modify-write
// at L2, so no SM issue slots per element. Used by the sm90 backward's dQ writer (FLEXATTN_SM90_BWD_DQ_BULK).
//
// Rules (PTX ISA, cp.reduce.async.bulk): both addresses 16-byte aligned, bytes a multiple of 16. The
// source is read through the async proxy: generic-proxy writes to it (st.shared) must be followed, in
// each writing thread, by fence.proxy.async.shared::cta and then a release (barrier / mbarrier arrive)
// that the issuing thread acquires. Commit groups and the waits are per thread: the thread that issued
// the reductions commits and waits for them.
namespace flexattn::kern::sm90 {

// dst: generic address of global memory (the identity map to the global window), src: shared-window
// address. f32 add, relaxed at gpu scope (the only semantics the bulk form has).
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, unsigned src, unsigned bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(dst), "r"(src),
               "r"(bytes)
               : "memory");
}

// Closes the bulk group of this thread's reductions issued since the previous commit.
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// Waits until at most N of this thread's committed bulk groups still *read* shared memory (the source
// may then be overwritten; the global adds may still be in flight).
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

// Waits until at most N of this thread's committed bulk groups are incomplete (global writes done).
template <int N>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

}  // namespace flexattn::kern::sm90
