#pragma once
// setmaxnreg (sm_90a): moves registers between warpgroups of a CTA. Every warp of a warpgroup must
// execute the same instruction; N is a multiple of 8 in [24, 256]. It only takes effect when the
// kernel has a register cap at entry (__launch_bounds__(threads, 1)); ptxas warns (C7508) otherwise.
// `inc` blocks until the pool freed by another warpgroup's `dec` can satisfy it, so producers `dec`
// first thing.
namespace flexattn::kern::sm90 {

template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg range");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg range");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}

}  // namespace flexattn::kern::sm90
