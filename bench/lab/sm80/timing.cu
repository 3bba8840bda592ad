// Timing table of the lab: bf16, B=2, H=16, L=S=8192, CUDA events, median of repeats after warm-up.
// TFLOP/s counts attended entries only: forward 4*D flops per entry, backward 2.5x forward (the
// convention of shared/reference/anchors-h200.md, so the numbers compare with the peers table).
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/numeric.cuh"
#include "dev_mem.h"
#include "reference.h"
#include "run_case.h"
#include "timing.cuh"
#include "variants.cuh"

namespace lab {
namespace {

struct TimeCfg {
  const char* name;
  int variant;
  int d;
  bool causal;  // block mask from q >= kv (block 128); else no block mask
  double lit0, lit1;
};

}  // namespace

void run_timings(const Registry& reg) {
  const int B = 2, H = 16, L = 8192, S = 8192, Dmax = 256;
  const size_t n = size_t(B) * H * L * Dmax, nrow = size_t(B) * H * L;
  DevMem q(n * 2), k(n * 2), v(n * 2), out(n * 2), dout(n * 2), dq(n * 2), dk(n * 2), dv(n * 2), acc(n * 4),
      lse(nrow * 4), delta(nrow * 4), slopes(H * 4);
  unsigned seed = 1;
  for (DevMem* m : {&q, &k, &v, &dout}) fill_random16<<<1024, 256>>>(m->as<unsigned>(), n / 2, seed++);
  std::vector<float> sl;
  for (int h = 0; h < H; ++h) sl.push_back(std::exp2(-8.0f * (h + 1) / H));
  slopes.upload(sl);
  LAB_CHECK(cudaDeviceSynchronize());

  ModParams mp{};
  HostWindow causal_mod;
  mp.lit[0] = 0, mp.lit[1] = 1 << 30;
  const HostBlockMask bm = build_block_mask(1, 1, L, S, 128, 128, causal_mod, mp);
  DeviceBlockMask dbm;

  const TimeCfg cfgs[] = {
      {"identity (no mask) D128", kIdentity, 128, false, 0, 0},
      {"causal D128", kWindow, 128, true, 0, 1 << 30},
      {"identity (no mask) D64", kIdentity, 64, false, 0, 0},
      {"causal D64", kWindow, 64, true, 0, 1 << 30},
      {"identity (no mask) D256", kIdentity, 256, false, 0, 0},
      {"causal D256", kWindow, 256, true, 0, 1 << 30},
      {"softcap 20 + causal D128", kSoftcapCausal, 128, true, 20.0, 0},
      {"alibi + causal D128", kAlibiCausal, 128, true, 0, 0},
  };
  std::printf("\ntiming: bf16 B=%d H=%d L=S=%d, median ms (TFLOP/s)\n", B, H, L);
  std::printf("%-26s %18s %18s %18s\n", "case", "fwd", "bwd (atomic dQ)", "bwd (deterministic)");
  for (const TimeCfg& c : cfgs) {
    const KernelSet* ks = reg.find(c.variant, Dt::BF16, c.d, c.d);
    if (ks == nullptr) continue;
    AttnParams p{};
    p.q = q.p, p.k = k.p, p.v = v.p, p.out = out.p, p.lse = lse.as<float>(), p.max_score = nullptr;
    p.q_sb = p.k_sb = p.v_sb = p.out_sb = (long long)H * L * c.d;
    p.q_sh = p.k_sh = p.v_sh = p.out_sh = (long long)L * c.d;
    p.q_sl = p.k_sl = p.v_sl = p.out_sl = c.d;
    p.dout_sb = p.dq_sb = p.dk_sb = p.dv_sb = p.q_sb;
    p.dout_sh = p.dq_sh = p.dk_sh = p.dv_sh = p.q_sh;
    p.dout_sl = p.dq_sl = p.dk_sl = p.dv_sl = p.q_sl;
    p.B = B, p.Hq = H, p.Hkv = H, p.Bkv = B, p.L = L, p.S = S, p.D = c.d, p.Dv = c.d;
    p.scale = float(1.0 / std::sqrt(double(c.d)));
    p.dout = dout.p, p.dq = dq.p, p.dk = dk.p, p.dv = dv.p, p.delta = delta.as<float>(), p.dq_accum = acc.as<float>();
    p.mask_B = p.mask_H = 1, p.nq = p.nkv = 1, p.q_block = p.kv_block = 1 << 30;
    p.mod.lit[0] = c.lit0, p.mod.lit[1] = c.lit1;
    p.mod.buf[0] = slopes.p;
    if (c.causal) dbm.upload(bm, &p);
    const double density = c.causal ? (L + 1.0) / (2.0 * L) : 1.0;
    const double fwd_flops = 4.0 * B * H * double(L) * S * c.d * density, bwd_flops = 2.5 * fwd_flops;
    const double t_fwd = median_ms([&] { ks->fwd(p); }, 3, 15);
    p.deterministic = 0;
    const double t_bwd = median_ms([&] { ks->bwd_pre(p), ks->bwd(p), ks->bwd_cvt(p); }, 2, 7);
    p.deterministic = 1;
    const double t_det = median_ms([&] { ks->bwd_pre(p), ks->bwd(p), ks->bwd_dq(p); }, 2, 7);
    LAB_CHECK(cudaDeviceSynchronize());
    std::printf("%-26s %8.3f (%5.0f)    %8.3f (%5.0f)    %8.3f (%5.0f)\n", c.name, t_fwd, fwd_flops / t_fwd * 1e-9,
                t_bwd, bwd_flops / t_bwd * 1e-9, t_det, bwd_flops / t_det * 1e-9);
    std::fflush(stdout);
  }
}

}  // namespace lab
