#pragma once
// Producer of the sm90 forward: one thread (warp 0, lane 0 of warpgroup 0) issues every TMA load.
// Q once (both consumer halves on one barrier), then K and V of each kv tile in block-mask order
// (partial tiles, then full ones: common/mask_iter.cuh) through a `stages`-deep ring. Before each K it
// publishes the tile start and kind in the stage's info slot, so the consumers never walk the lists
// themselves; after the last tile it publishes -1 on the next K barrier (plain arrive, no bytes).
#include "common/mask_iter.cuh"
#include "common/params.h"
#include "sm90/fwd_layout_sm90.cuh"
#include "sm90/ptx/mbarrier.cuh"
#include "sm90/ptx/smem.cuh"
#include "sm90/ptx/tma.cuh"

namespace flexattn::kern::sm90 {

template <int D, int Dv, bool kNarrow>
__device__ __forceinline__ void fwd_producer(const AttnParams& p, const FwdCfg<D, Dv, kNarrow>& c, int q0, int b, int h) {
  using C = FwdCfg<D, Dv, kNarrow>;
  tma_prefetch_map(&p.q_map);
  tma_prefetch_map(&p.k_map);
  tma_prefetch_map(&p.v_map);
  const int hk = h / (p.Hq / p.Hkv), bk = p.Bkv == 1 ? 0 : b;

  // Rows past L come back as zeros (TMA bounds), and the full box bytes are still credited.
  mbar_arrive_expect_tx(c.bar_q(), C::kQBytes);
#pragma unroll
  for (int w = 0; w < kSm90ConsumerWarpgroups; ++w) {
#pragma unroll
    for (int s = 0; s < D / 64; ++s)
      tma_load_4d(c.q_half(w) + s * C::kQSlabBytes, &p.q_map, c.bar_q(), 64 * s, q0 + 64 * w, h, b);
  }

  TileWalker walk;
  init_kv_walker(walk, p, b, h, q0, C::BN);
  RingPos pos{0, 0u};
  while (walk.next()) {
    const int kv0 = walk.start;
    mbar_wait(c.empty_k(pos.stage), pos.phase ^ 1u);
    st_shared_s32(c.info(pos.stage), kv0);
    st_shared_s32(c.info(pos.stage) + 4, walk.full ? 1 : 0);
    mbar_arrive_expect_tx(c.full_k(pos.stage), C::kKBytes);  // release: the info slot is visible
#pragma unroll
    for (int s = 0; s < D / 64; ++s)
      tma_load_4d(c.k_tile(pos.stage) + s * C::kKvSlabBytes, &p.k_map, c.full_k(pos.stage), 64 * s, kv0, hk, bk);
    mbar_wait(c.empty_v(pos.stage), pos.phase ^ 1u);
    mbar_arrive_expect_tx(c.full_v(pos.stage), C::kVBytes);
#pragma unroll
    for (int s = 0; s < Dv / 64; ++s)
      tma_load_4d(c.v_tile(pos.stage) + s * C::kKvSlabBytes, &p.v_map, c.full_v(pos.stage), 64 * s, kv0, hk, bk);
    pos.template advance<C::ST>();
  }
  mbar_wait(c.empty_k(pos.stage), pos.phase ^ 1u);
  st_shared_s32(c.info(pos.stage), -1);
  mbar_arrive(c.full_k(pos.stage));
}

}  // namespace flexattn::kern::sm90
