// sm80 attention kernel lab: correctness of forward + backward against the double CPU reference over a
// matrix of variants x lengths x head dims x GQA x dtypes (poisoned outputs, fresh random inputs per
// case), then timing at B=2 H=16 L=S=8192.
//   usage: harness [tests] [time] [--quick | --tiny] [--log FILE]   (default: tests and time)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "lab.h"
#include "reference.h"
#include "run_case.h"

#define LAB_SETS(X) \
  X(bf16, 64, 64) X(bf16, 96, 96) X(bf16, 128, 128) X(bf16, 256, 256) X(fp16, 64, 64) X(fp16, 96, 96) \
  X(fp16, 128, 128) X(fp16, 256, 256) X(bf16, 128, 64) X(bf16, 64, 128)
#define LAB_DECL(t, d, dv) void lab_register_##t##_##d##_##dv(lab::Registry&);
LAB_SETS(LAB_DECL)

namespace lab {

uint16_t f32_to_fp16(float f) {
  const uint32_t x = f32_to_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (ax < 0x38800000u) {                                    // below 2^-14: subnormal half, unit 2^-24
    const float t = bits_to_f32(ax) * 16777216.0f;
    return uint16_t(sign | uint32_t(std::nearbyint(t)));
  }
  uint32_t h = (((ax >> 23) - 112u) << 10) | ((ax & 0x7fffffu) >> 13);
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return uint16_t(sign | h);
}

float fp16_to_f32(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const float s = (h & 0x8000) ? -1.f : 1.f;
  if (e == 0) return s * std::ldexp(float(m), -24);
  if (e == 31) return m ? NAN : s * INFINITY;
  return s * std::ldexp(float(m | 0x400), e - 25);
}

namespace {

std::vector<Case> build_cases(bool quick, bool tiny) {
  std::vector<Case> cases;
  const std::vector<std::pair<int, int>> lengths = {{1, 1},     {17, 17},    {127, 127}, {128, 128}, {129, 129},
                                                    {1000, 1000}, {17, 1000}, {1000, 129}, {129, 1}};
  const std::vector<std::pair<int, int>> quick_lengths = {{17, 17}, {129, 129}, {1000, 129}};
  auto kinds = [](Case c, std::vector<Case>& out) {
    // identity: no block mask (null lists, every tile partial, no mask_mod)
    Case x = c;
    x.name = "identity";
    x.variant = kIdentity;
    x.dense = true;
    out.push_back(x);
    x = c;
    x.name = "causal";
    x.variant = kWindow;
    x.lit0 = 0;
    x.lit1 = 1 << 30;
    out.push_back(x);
    x.name = "sliding100_blk256";
    x.lit1 = 100;
    x.q_block = x.kv_block = 256;
    out.push_back(x);
    x = c;
    x.name = "shifted3_masked_rows";  // rows q < 3 are fully masked: out 0, lse -inf, grads 0
    x.variant = kWindow;
    x.lit0 = 3;
    x.lit1 = 1 << 30;
    out.push_back(x);
    x = c;
    x.name = "softcap2_causal";
    x.variant = kSoftcapCausal;
    x.lit0 = 2.0;
    out.push_back(x);
    x = c;
    x.name = "alibi_causal_maskBH";
    x.variant = kAlibiCausal;
    x.mask_bh = true;
    out.push_back(x);
    x = c;
    x.name = "relbias_bufgrad";
    x.variant = kRelBias;
    out.push_back(x);
  };
  if (tiny) {  // small and fast enough to run under compute-sanitizer
    for (int d : {64, 128, 256}) {
      for (int gqa : {1, 4}) {
        for (auto [L, S] : std::vector<std::pair<int, int>>{{17, 17}, {129, 65}}) {
          Case c;
          c.D = c.Dv = d;
          c.Hkv = 4 / gqa;
          c.Bkv = gqa == 4 ? 1 : 2;
          c.dlse = gqa == 4;
          c.L = L;
          c.S = S;
          kinds(c, cases);
        }
      }
    }
    return cases;
  }
  for (Dt dt : {Dt::BF16, Dt::FP16}) {
    for (int d : {64, 128, 256}) {
      for (int gqa : {1, 4}) {
        for (auto [L, S] : quick ? quick_lengths : lengths) {
          Case c;
          c.dt = dt;
          c.D = c.Dv = d;
          c.B = 2;
          c.Hq = 4;
          c.Hkv = 4 / gqa;
          c.Bkv = gqa == 4 ? 1 : 2;  // GQA cases also exercise the Bkv = 1 broadcast
          c.dlse = gqa == 4;
          c.L = L;
          c.S = S;
          kinds(c, cases);
        }
      }
    }
  }
  // The 1000 x 1000 cases dominate the reference's time (O(L S D) in double); keep them where a kernel
  // difference could hide elsewhere: every bf16 D=128 case, three kinds at D=64/256, a few fp16.
  auto big_ok = [](const Case& c) {
    const bool kind3 = c.name == "causal" || c.name == "softcap2_causal" || c.name == "relbias_bufgrad";
    if (c.dt == Dt::BF16) return c.D == 128 || kind3;
    return c.D == 128 && c.Hkv == c.Hq && kind3;
  };
  cases.erase(std::remove_if(cases.begin(), cases.end(),
                             [&](const Case& c) { return c.L == 1000 && c.S == 1000 && !big_ok(c); }),
              cases.end());
  // Head dim 96 and Dv != D, fewer lengths.
  for (auto [d, dv] : std::vector<std::pair<int, int>>{{96, 96}, {128, 64}, {64, 128}}) {
    for (auto [L, S] : std::vector<std::pair<int, int>>{{17, 17}, {129, 129}, {1000, 129}, {129, 1000}}) {
      Case c;
      c.dt = Dt::BF16;
      c.D = d;
      c.Dv = dv;
      c.B = 2;
      c.Hq = 4;
      c.Hkv = 2;
      c.Bkv = 2;
      c.L = L;
      c.S = S;
      kinds(c, cases);
    }
  }
  return cases;
}

}  // namespace
}  // namespace lab

int main(int argc, char** argv) {
  using namespace lab;
  bool do_tests = false, do_time = false, quick = false, tiny = false;
  std::string log_path = "sm80_tests.log";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "tests") do_tests = true;
    else if (a == "time") do_time = true;
    else if (a == "--quick") quick = true;
    else if (a == "--tiny") tiny = true;
    else if (a == "--log" && i + 1 < argc) log_path = argv[++i];
  }
  if (!do_tests && !do_time) do_tests = do_time = true;

  cudaDeviceProp prop;
  LAB_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, smem/block optin %zu KiB\n", prop.name, prop.multiProcessorCount,
              prop.sharedMemPerBlockOptin / 1024);
  Registry reg;
#define LAB_CALL(t, d, dv) lab_register_##t##_##d##_##dv(reg);
  LAB_SETS(LAB_CALL)

  int failures = 0;
  if (do_tests) {
    FILE* log = std::fopen(log_path.c_str(), "w");
    const auto cases = build_cases(quick, tiny);
    std::mt19937_64 rng(12345);
    const auto t0 = std::chrono::steady_clock::now();
    std::map<std::string, std::pair<int, int>> groups;  // name -> (pass, total)
    int n = 0;
    for (const Case& c : cases) {
      const CaseResult r = run_case(reg, c, rng);
      const std::string line = format_result(c, r);
      if (log) std::fprintf(log, "%s\n", line.c_str()), std::fflush(log);
      auto& g = groups[std::string(dt_name(c.dt)) + " D" + std::to_string(c.D) + "/" + std::to_string(c.Dv) + " " + c.name];
      g.second++;
      if (r.pass) {
        g.first++;
      } else if (++failures <= 12) {
        std::printf("FAIL %s\n", line.c_str());
      }
      if (++n % 100 == 0) std::fflush(stdout);
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (log) std::fclose(log);
    std::printf("\n%-44s %s\n", "group (dtype, D/Dv, case)", "pass/total");
    for (const auto& [name, pt] : groups) {
      std::printf("%-44s %3d/%-3d %s\n", name.c_str(), pt.first, pt.second, pt.first == pt.second ? "PASS" : "FAIL");
    }
    std::printf("tests: %zu cases, %d failed, %.1f s (log: %s)\n", cases.size(), failures, secs, log_path.c_str());
  }
  if (do_time) run_timings(reg);
  return failures == 0 ? 0 : 1;
}
