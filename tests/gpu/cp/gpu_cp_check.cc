// One-GPU checks of the context-parallel pieces (issue 8, docs/cp.md §4): the ring's fold kernel
// against cp::merge_attention (random partials, skipped -inf rows holding NaN garbage, pieces covering
// part of the rows), and split-KV attention (cuda_forward on KV chunks, folded) against one cuda_forward
// over the whole KV. Needs no NCCL and no second GPU. Exit 77 without a GPU (ctest: skipped).
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cp/ring_kernels.h"
#include "flexattn/attention.h"
#include "flexattn/cp.h"
#include "flexattn/mods.h"
#include "gpu/check_util.h"
#include "jit/device.h"

using namespace flexattn;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
int g_failed = 0;

void report(const std::string& what, double err, double limit) {
  const bool ok = err <= limit;
  std::printf("%s %-58s %.2e (limit %.1e)\n", ok ? "PASS" : "FAIL", what.c_str(), err, limit);
  g_failed += ok ? 0 : 1;
}

std::vector<float> download_f32(const jit::DeviceBuffer& b, size_t n) {
  std::vector<float> v(n);
  b.download(v.data(), n * 4);
  return v;
}

jit::DeviceBuffer upload(const HostTensor& t) {
  jit::DeviceBuffer b(std::max<size_t>(t.bytes.size(), 16));
  b.upload(t.bytes.data(), t.bytes.size());
  return b;
}

// Partials: out bf16 [B,H,L,Dv], lse f32 [B,H,L]; each partial covers rows [row0, row0 + rows).
void check_fold(std::mt19937& rng) {
  const int64_t B = 2, H = 3, L = 37, Dv = 64, BH = B * H;
  struct Piece {
    int64_t row0, rows;
  };
  const std::vector<Piece> pieces = {{0, L}, {0, L}, {10, 20}, {0, L}};
  std::uniform_real_distribution<double> val(-2, 2), lse_d(-6, 6);
  std::vector<HostTensor> outs, lses;  // full-row versions for the CPU merge (rows outside: -inf)
  jit::DeviceBuffer acc_out(size_t(BH * L * Dv) * 4), acc_lse(size_t(BH * L) * 4);
  cp::kernels::slice_or_fill(acc_out.as<float>(), nullptr, 1, BH * L * Dv, 0, 0, 0.f, nullptr);
  cp::kernels::slice_or_fill(acc_lse.as<float>(), nullptr, 1, BH * L, 0, 0, kNegInf, nullptr);
  for (size_t p = 0; p < pieces.size(); ++p) {
    const Piece pc = pieces[p];
    HostTensor out(DType::BF16, {B, H, L, Dv}), lse(DType::F32, {B, H, L});
    HostTensor part_out(DType::BF16, {B, H, pc.rows, Dv}), part_lse(DType::F32, {B, H, pc.rows});
    for (int64_t bh = 0; bh < BH; ++bh)
      for (int64_t r = 0; r < L; ++r) {
        const bool inside = r >= pc.row0 && r < pc.row0 + pc.rows;
        // Row 5 is skipped by every partial (merged: out 0, lse -inf); every 7th row by partial 1.
        const bool skipped = !inside || r == 5 || (p == 1 && r % 7 == 0);
        const double l = skipped ? -INFINITY : lse_d(rng);
        lse.set(bh * L + r, l);
        for (int64_t d = 0; d < Dv; ++d) {
          const double x = skipped ? NAN : val(rng);  // garbage the fold must not read
          out.set((bh * L + r) * Dv + d, x);
          if (inside) part_out.set((bh * pc.rows + r - pc.row0) * Dv + d, x);
        }
        if (inside) part_lse.set(bh * pc.rows + r - pc.row0, l);
      }
    for (int64_t i = 0; i < out.numel(); ++i)
      if (std::isnan(out.get(i))) out.set(i, 0.0);  // the CPU merge skips these rows anyway
    outs.push_back(out), lses.push_back(lse);
    jit::DeviceBuffer dpo = upload(part_out), dpl = upload(part_lse);
    cp::kernels::fold(reinterpret_cast<const void*>(dpo.ptr()), dpl.as<float>(), acc_out.as<float>(),
                      acc_lse.as<float>(), BH, pc.rows, pc.row0, L, Dv, DType::BF16, nullptr);
    jit::driver().cuCtxSynchronize();
  }
  const cp::Merged want = cp::merge_attention(outs, lses);
  const std::vector<float> got_out = download_f32(acc_out, size_t(BH * L * Dv)),
                           got_lse = download_f32(acc_lse, size_t(BH * L));
  double e_out = 0, e_lse = 0;
  bool empty_ok = true;
  for (int64_t i = 0; i < BH * L; ++i) {
    const double wl = want.lse.get(i), gl = got_lse[size_t(i)];
    if (std::isinf(wl)) {
      empty_ok = empty_ok && std::isinf(gl) && gl < 0;
      for (int64_t d = 0; d < Dv; ++d) empty_ok = empty_ok && got_out[size_t(i * Dv + d)] == 0.f;
      continue;
    }
    e_lse = std::max(e_lse, std::fabs(gl - wl));
    for (int64_t d = 0; d < Dv; ++d)
      e_out = std::max(e_out, std::fabs(double(got_out[size_t(i * Dv + d)]) - want.out.get(i * Dv + d)));
  }
  report("fold == merge_attention: out (4 partials, bf16, row0 10)", e_out, 1e-5);
  report("fold == merge_attention: lse", e_lse, 1e-5);
  report("fold: rows every partial skips give out 0, lse -inf", empty_ok ? 0 : 1, 0);
}

// Split-KV with position-free mods (no runtime position offsets in the kernels yet, docs/cp.md §4).
void check_split_kv(std::mt19937& rng, const char* name, const Variant& variant) {
  const int64_t B = 1, Hq = 4, Hkv = 2, L = 200, S = 1000, D = 64;
  const std::vector<int64_t> cuts = {0, 300, 700, 1000};
  std::normal_distribution<double> nd(0, 1);
  auto random = [&](std::vector<int64_t> shape) {
    HostTensor t(DType::BF16, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, nd(rng));
    return t;
  };
  const HostTensor q = random({B, Hq, L, D}), k = random({B, Hkv, S, D}), v = random({B, Hkv, S, D});
  jit::DeviceBuffer dq = upload(q), dk = upload(k), dv = upload(v);
  auto view = [](const jit::DeviceBuffer& b, std::vector<int64_t> shape, std::vector<int64_t> strides = {}) {
    TensorView t;
    t.data = reinterpret_cast<void*>(b.ptr());
    t.dtype = DType::BF16;
    t.shape = std::move(shape);
    t.strides = std::move(strides);
    return t;
  };
  jit::DeviceBuffer full_out(size_t(B * Hq * L * D) * 2), full_lse(size_t(B * Hq * L) * 4);
  ForwardArgs a;
  a.variant = &variant;
  a.q = view(dq, {B, Hq, L, D});
  a.k = view(dk, {B, Hkv, S, D});
  a.v = view(dv, {B, Hkv, S, D});
  a.out = view(full_out, {B, Hq, L, D});
  a.lse = full_lse.as<float>();
  cuda_forward(a);

  jit::DeviceBuffer acc_out(size_t(B * Hq * L * D) * 4), acc_lse(size_t(B * Hq * L) * 4);
  cp::kernels::slice_or_fill(acc_out.as<float>(), nullptr, 1, B * Hq * L * D, 0, 0, 0.f, nullptr);
  cp::kernels::slice_or_fill(acc_lse.as<float>(), nullptr, 1, B * Hq * L, 0, 0, kNegInf, nullptr);
  jit::DeviceBuffer part_out(size_t(B * Hq * L * D) * 2), part_lse(size_t(B * Hq * L) * 4);
  for (size_t c = 0; c + 1 < cuts.size(); ++c) {
    const int64_t s0 = cuts[c], n = cuts[c + 1] - cuts[c];
    ForwardArgs pa = a;
    // K/V chunk: a strided view into the whole cache (rows s0 .. s0 + n of every head).
    pa.k = view(dk, {B, Hkv, n, D}, {Hkv * S * D, S * D, D, 1});
    pa.k.data = static_cast<char*>(pa.k.data) + s0 * D * 2;
    pa.v = view(dv, {B, Hkv, n, D}, {Hkv * S * D, S * D, D, 1});
    pa.v.data = static_cast<char*>(pa.v.data) + s0 * D * 2;
    pa.out = view(part_out, {B, Hq, L, D});
    pa.lse = part_lse.as<float>();
    cuda_forward(pa);
    cp::kernels::fold(reinterpret_cast<const void*>(part_out.ptr()), part_lse.as<float>(), acc_out.as<float>(),
                      acc_lse.as<float>(), B * Hq, L, 0, L, D, DType::BF16, nullptr);
  }
  jit::driver().cuCtxSynchronize();
  HostTensor want_out(DType::BF16, {B, Hq, L, D});
  full_out.download(want_out.bytes.data(), want_out.bytes.size());
  const std::vector<float> want_lse = download_f32(full_lse, size_t(B * Hq * L)),
                           got_lse = download_f32(acc_lse, size_t(B * Hq * L)),
                           got_out = download_f32(acc_out, size_t(B * Hq * L * D));
  HostTensor got(DType::F32, {B, Hq, L, D});
  for (int64_t i = 0; i < got.numel(); ++i) got.set(i, got_out[size_t(i)]);
  double e_lse = 0;
  for (size_t i = 0; i < want_lse.size(); ++i) e_lse = std::max(e_lse, double(std::fabs(got_lse[i] - want_lse[i])));
  // Both sides round P (and the partial outputs) to bf16: a few bf16 ulps of the output scale.
  report(std::string("split KV (3 chunks) == one cuda_forward: out, ") + name,
         gpu_check::rel_err(got, want_out, gpu_check::max_abs(want_out)), 2e-2);
  report(std::string("split KV (3 chunks) == one cuda_forward: lse, ") + name, e_lse, 1e-3);
}

}  // namespace

int main() {
  std::string why;
  if (!cuda_available(&why)) {
    std::printf("SKIP: cuda backend unavailable: %s\n", why.c_str());
    return 77;
  }
  jit::use_device(0);
  std::mt19937 rng(7);
  try {
    check_fold(rng);
    Variant full;
    check_split_kv(rng, "no mods", full);
    Variant softcap;
    softcap.score_mod = mods::softcap(30);
    check_split_kv(rng, "softcap 30", softcap);
  } catch (const std::exception& e) {
    std::printf("FAIL error: %s\n", e.what());
    ++g_failed;
  }
  std::printf("\n%s\n", g_failed ? (std::to_string(g_failed) + " failed").c_str() : "all passed");
  return g_failed ? 1 : 0;
}
