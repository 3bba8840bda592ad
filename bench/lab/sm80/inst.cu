// One translation unit per (dtype, D, Dv), built with -DLAB_T=bf16|fp16 -DLAB_DT=BF16|FP16 -DLAB_D=..
// -DLAB_DV=..; registers the kernel sets of every lab variant as lab_register_<T>_<D>_<DV>. Split this
// way so the 150-odd kernel instantiations compile in parallel.
#include "lab.h"
#include "sm80/attn_bwd_sm80.cuh"
#include "sm80/attn_fwd_sm80.cuh"
#include "variants.cuh"

using namespace flexattn::kern;

namespace {

template <class V, class T, int D, int Dv>
__global__ void __launch_bounds__(sm80_fwd_threads(D, Dv), 1) k_fwd(const __grid_constant__ AttnParams p) {
  attn_fwd_sm80<V, T, D, Dv>(p);
}
template <class T, int D, int Dv>
__global__ void __launch_bounds__(sm80_aux_threads(), 1) k_pre(const __grid_constant__ AttnParams p) {
  attn_bwd_preprocess_sm80<T, D, Dv>(p);
}
template <class V, class T, int D, int Dv>
__global__ void __launch_bounds__(sm80_bwd_threads(D, Dv), 1) k_bwd(const __grid_constant__ AttnParams p) {
  attn_bwd_sm80<V, T, D, Dv>(p);
}
template <class V, class T, int D, int Dv>
__global__ void __launch_bounds__(sm80_bwd_dq_threads(D, Dv), 1) k_bwd_dq(const __grid_constant__ AttnParams p) {
  attn_bwd_dq_sm80<V, T, D, Dv>(p);
}
template <class T, int D>
__global__ void __launch_bounds__(sm80_aux_threads(), 1) k_cvt(const __grid_constant__ AttnParams p) {
  attn_bwd_dq_convert_sm80<T, D>(p);
}

template <class K>
void launch(K kernel, Sm80Launch g, const AttnParams& p) {
  if (g.grid_x == 0) return;
  if (g.smem > 48 * 1024) {
    LAB_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(g.smem)));
  }
  kernel<<<dim3(g.grid_x, g.grid_y, g.grid_z), g.block, g.smem>>>(p);
  LAB_CHECK(cudaGetLastError());
}

template <class V, class T, int D, int Dv>
lab::KernelSet make_set() {
  lab::KernelSet s;
  s.fwd = [](const AttnParams& p) { launch(k_fwd<V, T, D, Dv>, sm80_fwd_launch(D, Dv, p.B, p.Hq, p.L), p); };
  s.bwd_pre = [](const AttnParams& p) { launch(k_pre<T, D, Dv>, sm80_bwd_preprocess_launch(p.B, p.Hq, p.L), p); };
  s.bwd = [](const AttnParams& p) { launch(k_bwd<V, T, D, Dv>, sm80_bwd_launch(D, Dv, p.Bkv, p.Hkv, p.S), p); };
  s.bwd_dq = [](const AttnParams& p) { launch(k_bwd_dq<V, T, D, Dv>, sm80_bwd_dq_launch(D, Dv, p.B, p.Hq, p.L), p); };
  s.bwd_cvt = [](const AttnParams& p) { launch(k_cvt<T, D>, sm80_bwd_dq_convert_launch(p.B, p.Hq, p.L), p); };
  return s;
}

}  // namespace

#define LAB_CAT2(a, b, c, d) lab_register_##a##_##b##_##c
#define LAB_CAT(a, b, c) LAB_CAT2(a, b, c, 0)
#define LAB_REGISTER LAB_CAT(LAB_T, LAB_D, LAB_DV)

void LAB_REGISTER(lab::Registry& r) {
  using T = LAB_T;
  constexpr lab::Dt dt = lab::Dt::LAB_DT;
  r.add(lab::kIdentity, dt, LAB_D, LAB_DV, make_set<IdentityVariant, T, LAB_D, LAB_DV>());
  r.add(lab::kWindow, dt, LAB_D, LAB_DV, make_set<lab::WindowVariant, T, LAB_D, LAB_DV>());
  r.add(lab::kSoftcapCausal, dt, LAB_D, LAB_DV, make_set<lab::SoftcapCausalVariant, T, LAB_D, LAB_DV>());
  r.add(lab::kAlibiCausal, dt, LAB_D, LAB_DV, make_set<lab::AlibiCausalVariant, T, LAB_D, LAB_DV>());
  r.add(lab::kRelBias, dt, LAB_D, LAB_DV, make_set<lab::RelBiasVariant, T, LAB_D, LAB_DV>());
}
