// Candidate tiles, built with -DSWEEP_PART=0 (fwd), 1 (bwd main) or 2 (dQ pass).
#include "sm80/attn_bwd_sm80.cuh"
#include "sm80/attn_fwd_sm80.cuh"
#include "sweep.h"

using namespace flexattn::kern;

namespace {

template <int D, int BM, int BN, int NW, int ST>
__global__ void __launch_bounds__(NW * 32, 1) sw_fwd(const __grid_constant__ AttnParams p) {
  attn_fwd_sm80<IdentityVariant, bf16, D, D, BM, BN, NW>(p);
}
template <int D, int BM, int BN, int NW, int ST>
__global__ void __launch_bounds__(NW * 32, 1) sw_bwd(const __grid_constant__ AttnParams p) {
  attn_bwd_sm80<IdentityVariant, bf16, D, D, BM, BN, NW, ST>(p);
}
template <int D, int BM, int BN, int NW, int ST>
__global__ void __launch_bounds__(NW * 32, 1) sw_dq(const __grid_constant__ AttnParams p) {
  attn_bwd_dq_sm80<IdentityVariant, bf16, D, D, BM, BN, NW>(p);
}

template <int D>
__global__ void __launch_bounds__(sm80_aux_threads(), 1) sw_pre(const __grid_constant__ AttnParams p) {
  attn_bwd_preprocess_sm80<bf16, D, D>(p);
}

template <class K>
void launch(K kernel, unsigned gx, unsigned gy, unsigned gz, int threads, int smem, const AttnParams& p) {
  if (smem > 48 * 1024) LAB_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  kernel<<<dim3(gx, gy, gz), threads, smem>>>(p);
  LAB_CHECK(cudaGetLastError());
}

template <int D, int BM, int BN, int NW, int ST>
void add(std::vector<lab::SweepEntry>& out) {
  const Sm80Tile t{BM, BN, NW, ST};
#if SWEEP_PART == 0
  out.push_back({"fwd", D, t, [t](const AttnParams& p) {
                   launch(sw_fwd<D, BM, BN, NW, ST>, sm80_cdiv(p.L, BM), p.Hq, p.B, NW * 32, sm80_fwd_smem_for(t, D, D), p);
                 }});
#elif SWEEP_PART == 1
  out.push_back({"bwd", D, t, [t](const AttnParams& p) {
                   launch(sw_bwd<D, BM, BN, NW, ST>, sm80_cdiv(p.S, BN), p.Hkv, p.Bkv, NW * 32, sm80_bwd_smem_for(t, D, D), p);
                 }});
#else
  out.push_back({"dq", D, t, [t](const AttnParams& p) {
                   launch(sw_dq<D, BM, BN, NW, ST>, sm80_cdiv(p.L, BM), p.Hq, p.B, NW * 32, sm80_bwd_dq_smem_for(t, D, D), p);
                 }});
#endif
}

template <int D>
void add_pre(std::vector<lab::SweepEntry>& out) {
  out.push_back({"pre", D, Sm80Tile{0, 0, 0, 0}, [](const AttnParams& p) {
                   const Sm80Launch g = sm80_bwd_preprocess_launch(p.B, p.Hq, p.L);
                   launch(sw_pre<D>, g.grid_x, g.grid_y, g.grid_z, int(g.block), 0, p);
                 }});
}

}  // namespace

#if SWEEP_PART == 0
void lab::sweep_register_part0(std::vector<SweepEntry>& o) {
  add<128, 128, 64, 8, 2>(o), add<128, 128, 32, 4, 2>(o), add<128, 64, 64, 4, 2>(o), add<128, 128, 128, 8, 2>(o);
  add<128, 64, 32, 4, 2>(o);
  add<64, 128, 64, 8, 2>(o), add<64, 128, 64, 4, 2>(o), add<64, 128, 128, 8, 2>(o), add<64, 64, 64, 4, 2>(o);
  add<256, 128, 32, 8, 2>(o), add<256, 64, 32, 4, 2>(o);
}
#elif SWEEP_PART == 1
void lab::sweep_register_part1(std::vector<SweepEntry>& o) {
  add_pre<64>(o), add_pre<128>(o), add_pre<256>(o);
  add<128, 64, 64, 8, 2>(o), add<128, 32, 64, 8, 2>(o), add<128, 64, 64, 8, 1>(o);
  add<64, 64, 64, 8, 2>(o), add<64, 64, 128, 8, 2>(o), add<64, 128, 128, 8, 2>(o);
  add<256, 64, 32, 8, 1>(o), add<256, 32, 64, 8, 1>(o), add<256, 64, 32, 8, 2>(o);
}
#else
void lab::sweep_register_part2(std::vector<SweepEntry>& o) {
  add<128, 64, 64, 4, 2>(o), add<128, 64, 32, 4, 2>(o), add<128, 128, 64, 8, 2>(o), add<128, 128, 32, 8, 2>(o);
  add<64, 64, 64, 4, 2>(o), add<64, 128, 64, 8, 2>(o);
  add<256, 64, 16, 4, 2>(o), add<256, 128, 16, 8, 2>(o);
}
#endif
