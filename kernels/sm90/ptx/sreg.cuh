#pragma once
// Special registers read with asm volatile.
namespace flexattn::kern::sm90 {

// %tid.x read again: a volatile read is not merged with earlier ones, so an index needed only after a long loop
// is recomputed there from it instead of being held across the loop (where it may spill). Session 27: the tall
// forward tile's ALiBi with the rotated loop kept its rows' q index live from the prologue to the epilogue and
// spilled it (60 bytes, ptxas 13.0).
__device__ __forceinline__ unsigned tid_x_again() {
  unsigned v;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(v));
  return v;
}

}  // namespace flexattn::kern::sm90
