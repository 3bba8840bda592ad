#pragma once
// TMA (cp.async.bulk.tensor, sm_90) through host-encoded tensor maps (CUtensorMap, 128 bytes) that live
// in kernel parameter space: `map` is the generic address of a __grid_constant__ parameter field, the
// only place a kernel may read a tensor map from without a tensormap proxy fence.
//
// Every map here but the decode ring's whole-row maps (tma_load_5d) is 4-D, innermost first: (head dim, rows, head, batch), box (64, rows, 1, 1) with
// 128-byte swizzle, so one load fills one [rows][64] slab of a tile (see tile_config_sm90.h).
namespace flexattn::kern::sm90 {

__device__ __forceinline__ unsigned long long map_addr(const void* map) {
  return reinterpret_cast<unsigned long long>(map);
}

__device__ __forceinline__ void tma_prefetch_map(const void* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(map_addr(map)) : "memory");
}

// Global -> shared; completion (bytes) is signalled on mbarrier `bar`. Out-of-bounds elements are
// zero-filled. The .shared::cluster destination is the CTA's own window when there is no cluster.
__device__ __forceinline__ void tma_load_4d(unsigned dst, const void* map, unsigned bar, int c0, int c1, int c2,
                                            int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, "
      "%6}], [%2];" ::"r"(dst),
      "l"(map_addr(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// The 5-D form: the decode ring's whole-row maps (decode/decode_tma.cuh, FLEXATTN_DECODE_TMA_WHOLE), innermost first
// (64 columns, the row's 64-column pieces, rows, head, batch).
__device__ __forceinline__ void tma_load_5d(unsigned dst, const void* map, unsigned bar, int c0, int c1, int c2,
                                            int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, "
      "%6, %7}], [%2];" ::"r"(dst),
      "l"(map_addr(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
}

// The forms with an L2 cache policy (createpolicy; the decode ring's FLEXATTN_DECODE_EVICT_FIRST).
__device__ __forceinline__ void tma_load_4d(unsigned dst, const void* map, unsigned bar, int c0, int c1, int c2, int c3,
                                            unsigned long long policy) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%3, "
      "%4, %5, %6}], [%2], %7;" ::"r"(dst),
      "l"(map_addr(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "l"(policy)
      : "memory");
}
__device__ __forceinline__ void tma_load_5d(unsigned dst, const void* map, unsigned bar, int c0, int c1, int c2, int c3,
                                            int c4, unsigned long long policy) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%3, "
      "%4, %5, %6, %7}], [%2], %8;" ::"r"(dst),
      "l"(map_addr(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "l"(policy)
      : "memory");
}

// Global -> L2 only (no shared memory, no barrier): the persistent backward warms its next work tile's
// K and V while the current tile still runs.
__device__ __forceinline__ void tma_prefetch_l2_4d(const void* map, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%0, {%1, %2, %3, %4}];" ::"l"(map_addr(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}

// Shared -> global; elements outside the tensor bounds are not written (how rows >= L are skipped).
__device__ __forceinline__ void tma_store_4d(const void* map, unsigned src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
                   map_addr(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}

// Shared -> global, 3-D map (the dq_accum map of FLEXATTN_SM90_BWD_V3): the first writer of a dQ tile stores it
// (FLEXATTN_SM90_BWD_DQ_CLAIM). Elements outside the tensor bounds are not written.
__device__ __forceinline__ void tma_store_3d(const void* map, unsigned src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
                   map_addr(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}

// Shared -> global element-wise f32 add (the map's type; reduction at L2), 3-D map: the sm90 backward's
// dQ tile into dq_accum (FLEXATTN_SM90_BWD_V3). Elements outside the tensor bounds are skipped (rows >= L).
__device__ __forceinline__ void tma_reduce_add_3d(const void* map, unsigned src, int c0, int c1, int c2) {
  asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
                   map_addr(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}

__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// Waits until the committed stores have finished *reading* shared memory (the smem may be reused or
// the CTA may exit; the global writes complete on their own).
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

}  // namespace flexattn::kern::sm90
