// Tile sweep driver: times every candidate tile of sweep_kernels.cu at bf16 B=2 H=16 L=S=8192 (identity,
// no block mask) and checks each against the first candidate of its kind (max abs difference).
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/numeric.cuh"
#include "dev_mem.h"
#include "sweep.h"
#include "timing.cuh"

namespace lab {
uint16_t f32_to_fp16(float) { return 0; }
float fp16_to_f32(uint16_t) { return 0; }
}  // namespace lab

namespace {

double max_diff(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = lab::bf16_to_f32(a[i]), y = lab::bf16_to_f32(b[i]);
    m = std::isfinite(x) ? std::max(m, std::fabs(x - y)) : INFINITY;
  }
  return m;
}

}  // namespace

int main() {
  using namespace lab;
  std::vector<SweepEntry> es;
  sweep_register_part0(es), sweep_register_part1(es), sweep_register_part2(es);
  const int B = 2, H = 16, L = 8192, S = 8192;
  const size_t n = size_t(B) * H * L * 256, nrow = size_t(B) * H * L;
  DevMem q(n * 2), k(n * 2), v(n * 2), out(n * 2), dout(n * 2), dq(n * 2), dk(n * 2), dv(n * 2), acc(n * 4),
      lse(nrow * 4), delta(nrow * 4);
  unsigned seed = 7;
  for (DevMem* m : {&q, &k, &v, &dout}) fill_random16<<<1024, 256>>>(m->as<unsigned>(), n / 2, seed++);
  LAB_CHECK(cudaDeviceSynchronize());
  std::printf("tile sweep: bf16 identity B=%d H=%d L=S=%d; median ms; TFLOP/s (bwd: 2.5x fwd flops)\n", B, H, L);
  std::printf("%-4s %4s %-16s %9s %8s %12s\n", "kind", "D", "tile m,n,w,st", "ms", "TFLOP/s", "maxdiff");
  for (int d : {64, 128, 256}) {
    AttnParams p{};
    p.q = q.p, p.k = k.p, p.v = v.p, p.out = out.p, p.lse = lse.as<float>();
    p.q_sb = p.k_sb = p.v_sb = p.out_sb = p.dout_sb = p.dq_sb = p.dk_sb = p.dv_sb = (long long)H * L * d;
    p.q_sh = p.k_sh = p.v_sh = p.out_sh = p.dout_sh = p.dq_sh = p.dk_sh = p.dv_sh = (long long)L * d;
    p.q_sl = p.k_sl = p.v_sl = p.out_sl = p.dout_sl = p.dq_sl = p.dk_sl = p.dv_sl = d;
    p.B = B, p.Hq = H, p.Hkv = H, p.Bkv = B, p.L = L, p.S = S, p.D = d, p.Dv = d;
    p.scale = float(1.0 / std::sqrt(double(d)));
    p.dout = dout.p, p.dq = dq.p, p.dk = dk.p, p.dv = dv.p, p.delta = delta.as<float>(), p.dq_accum = acc.as<float>();
    p.mask_B = p.mask_H = 1, p.nq = p.nkv = 1, p.q_block = p.kv_block = 1 << 30;
    const double fwd_flops = 4.0 * B * H * double(L) * S * d, bwd_flops = 2.5 * fwd_flops;
    const size_t nel = size_t(B) * H * L * d;
    std::vector<uint16_t> ref_out, ref_dk, ref_dq;
    const SweepEntry* pre = nullptr;
    for (const SweepEntry& e : es) {
      if (e.kind == "pre" && e.d == d) pre = &e;
    }
    for (const char* kind : {"fwd", "bwd", "dq"}) {
      for (const SweepEntry& e : es) {
        if (e.kind != kind || e.d != d) continue;
        std::vector<uint16_t>* ref = e.kind == "fwd" ? &ref_out : e.kind == "bwd" ? &ref_dk : &ref_dq;
        DevMem* res = e.kind == "fwd" ? &out : e.kind == "bwd" ? &dk : &dq;
        double ms = 0;
        if (e.kind == "fwd") {
          ms = median_ms([&] { e.run(p); }, 3, 10);
        } else {
          p.deterministic = e.kind == "dq";
          pre->run(p);
          ms = median_ms([&] { e.run(p); }, 2, 6);
          pre->run(p);  // clean dq_accum / delta for the check run below
        }
        res->poison();
        e.run(p);
        LAB_CHECK(cudaDeviceSynchronize());
        const auto got = res->download<uint16_t>(nel);
        if (ref->empty()) *ref = got;
        const double flops = e.kind == "fwd" ? fwd_flops : bwd_flops;
        char tile[32];
        std::snprintf(tile, sizeof tile, "%d,%d,%d,%d", e.tile.block_m, e.tile.block_n, e.tile.warps, e.tile.stages);
        std::printf("%-4s %4d %-16s %9.3f %8.0f %12.3e\n", kind, d, tile, ms, flops / ms * 1e-9, max_diff(got, *ref));
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
