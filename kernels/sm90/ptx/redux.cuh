#pragma once
// redux.sync (sm_80+ integer warp reductions; sm_90 writes the result to a uniform register when every lane of
// the mask takes part). Used as a "make uniform" move: with every lane of `mask` holding the same value,
// `or` returns it, and ptxas keeps it -- and what is computed from it -- on the uniform datapath, off the
// thread's registers (the 24-register producer and writer warps; wgmma descriptors without R2UR moves).
namespace flexattn::kern::sm90 {

__device__ __forceinline__ unsigned redux_or(unsigned v, unsigned mask) {
  unsigned u;
  asm volatile("redux.sync.or.b32 %0, %1, %2;" : "=r"(u) : "r"(v), "r"(mask));
  return u;
}

}  // namespace flexattn::kern::sm90
