// GPU tier: every cuda kernel against the CPU reference, for the mod corpus x lengths x head dims x
// GQA x dtypes, forward and backward, with fresh random inputs and poisoned outputs (cuda_run_host).
// A plain program (the GPU machine may lack GoogleTest); prints a pass/fail table last and exits
// non-zero on any failure, 77 (ctest's skip code) without a GPU.
//
// Tolerances are relative to the precision of the inputs: the reference runs in double on the very
// bf16/f16 values the GPU sees, so the remaining error is the kernel's rounding of P to 16 bits before
// P.V (2^-8 relative for bf16, 2^-11 for f16) plus fp32 accumulation. Bounds are those rounding errors
// times a safety factor of ~4, scaled by the largest reference magnitude.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <set>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "flexattn/attention.h"
#include "flexattn/block_mask.h"
#include "flexattn/cp.h"
#include "flexattn/cpu_variant.h"
#include "flexattn/cuda_host.h"
#include "flexattn/decode.h"
#include "flexattn/error.h"
#include "flexattn/ir_text.h"
#include "flexattn/mods.h"
#include "flexattn/reference.h"
#include "corpus.h"
#include "gpu/check_util.h"
#include "runtime/decode_hook.h"
#include "runtime/kernel_set.h"
#include "runtime/sm90_backward.h"
#include "runtime/tma_sm90.h"
#include "sm90/tile_config_sm90.h"
#include "sm90/tile_config_sm90_bwd.h"

using namespace flexattn;
using corpus::CorpusEntry;
using Corpus = corpus::CorpusEntry;

namespace {

struct Case {
  const Corpus* mod;
  int64_t L, S, D, Dv, Hq, Hkv, B;
  DType dtype;
  bool backward;
  bool deterministic;
  int64_t q_off = 0, kv_off = 0;  // positions the mods see (ForwardArgs.q_offset / kv_offset)
  bool block_mask = true;         // false: a mask_mod without a block mask (every tile partial, the C++ API allows it)
};

struct Row {
  std::string label;
  double err_out = 0, err_lse = 0, err_grad = 0;
  bool ok = true;
  std::string why;
};

using gpu_check::max_abs;
using gpu_check::rel_err;

HostTensor random_tensor(std::vector<int64_t> shape, DType t, uint64_t seed) {
  HostTensor x(t, shape);
  mods::fill_normal(&x, seed, 1.0);
  return x;
}

Row run_case(const Case& k, uint64_t seed) {
  Row row;
  char label[256];
  std::snprintf(label, sizeof label, "%-22s %-4s L=%-4lld S=%-4lld D=%-3lld G=%lld %s%s", k.mod->name.c_str(),
                k.dtype == DType::BF16 ? "bf16" : "f16", (long long)k.L, (long long)k.S, (long long)k.D,
                (long long)(k.Hq / k.Hkv), k.backward ? "fwd+bwd" : "fwd", k.deterministic ? " det" : "");
  row.label = label;
  if (k.q_off || k.kv_off) row.label += " off=" + std::to_string(k.q_off) + "," + std::to_string(k.kv_off);
  if (!k.block_mask) row.label += " no-block-mask";
  try {
    mods::ProblemShape shape{k.B, k.Hq, k.Hkv, k.L, k.S, k.D, k.Dv, seed};
    corpus::BuiltVariant built = corpus::build_variant(*k.mod, shape);
    const HostTensor q = random_tensor({k.B, k.Hq, k.L, k.D}, k.dtype, seed * 4 + 1);
    const HostTensor kk = random_tensor({k.B, k.Hkv, k.S, k.D}, k.dtype, seed * 4 + 2);
    const HostTensor v = random_tensor({k.B, k.Hkv, k.S, k.Dv}, k.dtype, seed * 4 + 3);
    const HostTensor dout = random_tensor({k.B, k.Hq, k.L, k.Dv}, DType::F32, seed * 4 + 4);
    const HostTensor dlse = random_tensor({k.B, k.Hq, k.L}, DType::F32, seed * 4 + 5);

    std::unique_ptr<BlockMask> bm;
    cpu::VariantFns fns(built.variant, built.bindings, 0);
    // The reference sees the offsets through wrapped mods (cp::offset_mods), the block mask is local.
    const cpu::ModFns ref_fns = cp::offset_mods(fns.fns(), k.q_off, k.kv_off);
    if (!built.variant.mask_mod.empty() && k.block_mask) {
      const auto& mask = ref_fns.mask_mod;
      bm = std::make_unique<BlockMask>(build_block_mask(
          MaskFn([&](int64_t b, int64_t h, int64_t q, int64_t kv) { return mask(b, h, q, kv); }), k.B, k.Hq, k.L, k.S));
    }
    cpu::Options opt;
    opt.block_mask = bm.get();
    const cpu::ForwardResult ref = cpu::forward(q, kk, v, ref_fns, opt);

    CudaHostRequest req;
    req.variant = &built.variant;
    req.bindings = &built.bindings;
    req.q = &q, req.k = &kk, req.v = &v;
    req.dtype = k.dtype;
    req.block_mask = bm.get();
    req.q_offset = k.q_off, req.kv_offset = k.kv_off;
    if (k.backward) req.dout = &dout, req.dlse = &dlse;
    req.deterministic = k.deterministic;
    const CudaHostResult got = cuda_run_host(req);

    const double p_err = k.dtype == DType::BF16 ? 1.0 / 256 : 1.0 / 2048;
    // An approximate instruction in the mod (tanh_approx) moves scores by up to score_err: lse and the row max
    // by as much, P (so out and the gradients) by that relative amount.
    const double s_err = k.mod->score_err;
    row.err_out = rel_err(got.out, ref.out, max_abs(ref.out));
    row.err_lse = rel_err(got.lse, ref.lse, 1.0);
    if (!(row.err_out <= 4 * p_err + 2 * s_err)) row.ok = false, row.why += " out";
    if (!(row.err_lse <= 1e-3 + s_err)) row.ok = false, row.why += " lse";
    if (!(rel_err(got.max_score, ref.max_score, 1.0) <= 1e-3 + s_err)) row.ok = false, row.why += " max";

    if (k.backward) {
      fns.reset_buffer_grads();
      const cpu::BackwardResult rb = cpu::backward(q, kk, v, dout, &dlse, ref_fns, opt);
      const double tol = 16 * p_err + 4 * s_err;
      const struct { const char* n; const HostTensor* g; const HostTensor* w; } grads[] = {
          {"dq", &got.dq, &rb.dq}, {"dk", &got.dk, &rb.dk}, {"dv", &got.dv, &rb.dv}};
      for (const auto& g : grads) {
        const double e = rel_err(*g.g, *g.w, max_abs(*g.w));
        row.err_grad = std::max(row.err_grad, e);
        if (!(e <= tol)) row.ok = false, row.why += std::string(" ") + g.n;
      }
      for (const auto& [name, want] : fns.buffer_grads()) {
        auto it = got.buffer_grads.find(name);
        if (it == got.buffer_grads.end()) {
          row.ok = false, row.why += " no-grad:" + name;
          continue;
        }
        const double e = rel_err(it->second, want, max_abs(want));
        row.err_grad = std::max(row.err_grad, e);
        if (!(e <= tol)) row.ok = false, row.why += " d" + name;
      }
      if (k.deterministic) {
        const CudaHostResult again = cuda_run_host(req);
        for (const auto& [a, b, n] : {std::tuple{&got.dq, &again.dq, "dq"}, {&got.dk, &again.dk, "dk"},
                                      {&got.dv, &again.dv, "dv"}})
          if (a->bytes != b->bytes) row.ok = false, row.why += std::string(" nondeterministic-") + n;
        // Learnable buffers' gradients too (exact sums: runtime/exact_grads.h).
        for (const auto& [name, g] : got.buffer_grads) {
          auto it = again.buffer_grads.find(name);
          if (it == again.buffer_grads.end() || it->second.bytes != g.bytes)
            row.ok = false, row.why += " nondeterministic-d" + name;
        }
      }
    }
  } catch (const std::exception& e) {
    row.ok = false;
    row.why = std::string(" error: ") + e.what();
  }
  return row;
}

std::string device_arch_string() {
  static const std::string arch = cuda_device_arch(0);
  return arch;
}

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  if (!cuda_available(&why)) {
    std::printf("SKIP: cuda backend unavailable: %s\n", why.c_str());
    return 77;
  }
  bool quick = false, deterministic_only = false;
  std::vector<std::string> only;  // --only SUBSTR (repeatable): keep cases whose mod name contains one
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--deterministic") == 0) {
      deterministic_only = true;
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only.push_back(argv[++i]);
    } else {
      std::printf("usage: gpu_attention_check [--quick] [--deterministic] [--only SUBSTR]...\n"
                  "  --quick        lengths 17 and 129 only (385 for the other mods at D=64)\n"
                  "  --deterministic  only the deterministic-mode cases (bitwise-compared run to run)\n"
                  "  --only SUBSTR  only the cases whose corpus mod name contains SUBSTR (repeatable; e.g.\n"
                  "                 --only learnable: the variants with buffer gradients)\n");
      return std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0 ? 0 : 2;
    }
  }
  const std::vector<Corpus>& corpus = corpus::mod_corpus();
  std::vector<Case> cases;
  const std::vector<int64_t> lengths = quick ? std::vector<int64_t>{17, 129} : std::vector<int64_t>{1, 17, 127, 128, 129, 1000};
  // Identity and causal: the whole cross product the issue lists.
  for (const Corpus* c : {&corpus[0], &corpus[1]})
    for (int64_t L : lengths)
      for (int64_t D : {64, 128, 256})
        for (int64_t G : {1, 4})
          for (DType t : {DType::BF16, DType::F16})
            cases.push_back({c, L, L, D, D, 4, 4 / G, 1, t, true, false});
  // Long sequences once each.
  if (!quick) {
    cases.push_back({&corpus[1], 4097, 4097, 64, 64, 4, 1, 1, DType::BF16, true, false});
    cases.push_back({&corpus[0], 4097, 4097, 128, 128, 2, 2, 1, DType::F16, false, false});
  }
  // The quick run's one length per head dim for the cases below: D=64 at 385 (four kv tiles, the last one column wide:
  // a kv loop's steady state runs from the third tile on, where session 28's REL_DIAG bug showed; three 192-row tall
  // tiles) and the others at 129.
  const auto quick_length = [](int64_t D) -> int64_t { return D == 64 ? 385 : 129; };
  // Every other mod: a few lengths, both head dims that matter most, GQA 4 and 1, B=2.
  for (size_t i = 2; i < corpus.size(); ++i)
    for (int64_t D : {64, 128})
      for (int64_t L : quick ? std::vector<int64_t>{quick_length(D)} : std::vector<int64_t>{17, 129, 1000})
        cases.push_back({&corpus[i], L, L, D, D, 4, D == 64 ? 1 : 4, 2, DType::BF16, true, false});
  // Head dim 256 for every other mod too (on sm_90a the backward's wide kernel: 64-row kv tiles, each consumer
  // warpgroup half of the query columns, so mods see query offsets of 32 inside a tile), GQA 2.
  for (size_t i = 2; i < corpus.size(); ++i)
    for (int64_t L : quick ? std::vector<int64_t>{129} : std::vector<int64_t>{17, 1000})
      cases.push_back({&corpus[i], L, L, 256, 256, 4, 2, 2, DType::BF16, true, false});
  // Head dims between the sm90 forward's compiled ones (sm90_padded_head_dim: the next one up, zeros past d), with a
  // mask, a score_mod, Dv != D, f16. The backward pads too (FLEXATTN_SM90_BWD_PAD_HEAD_DIM, session 32's default;
  // sm90_bwd_padded_head_dim: 96 on the 128 kernel, 192 on the wide one; the deterministic 96 through the ordered dQ
  // reductions, a deterministic 192 declines; `0` runs them on the sm80 family); 80 / 112 are forward only (the
  // backward takes multiples of 32 up to 128 and of 64 above).
  cases.push_back({&corpus[1], 385, 385, 96, 96, 4, 2, 2, DType::BF16, true, false});
  cases.push_back({&corpus::corpus_entry("alibi+causal"), 1000, 1000, 128, 96, 4, 4, 1, DType::F16, true, false});
  cases.push_back({&corpus[1], 129, 129, 192, 192, 4, 2, 1, DType::BF16, true, false});
  cases.push_back({&corpus::corpus_entry("document:3"), 1000, 1000, 96, 96, 4, 1, 2, DType::BF16, true, true});
  cases.push_back({&corpus[0], 129, 700, 160, 160, 4, 4, 1, DType::F16, false, false});
  cases.push_back({&corpus::corpus_entry("alibi+causal"), 300, 300, 80, 112, 4, 1, 1, DType::BF16, false, false});
  // Unequal lengths, Dv != D, batch broadcast shapes, deterministic mode.
  cases.push_back({&corpus[1], 300, 700, 64, 128, 4, 2, 2, DType::BF16, true, false});
  cases.push_back({&corpus[7], 700, 300, 128, 64, 4, 4, 1, DType::F16, true, false});
  cases.push_back({&corpus[1], 1000, 1000, 128, 128, 4, 1, 1, DType::BF16, true, true});
  cases.push_back({&corpus[9], 257, 257, 64, 64, 4, 4, 1, DType::BF16, true, true});
  // Deterministic mode across mask shapes (the sm90 backward orders its dQ reductions by the block lists:
  // docs/kernels_sm90.md, "Deterministic dQ"), GQA with batch broadcast, odd lengths, both head dims; every
  // deterministic case is also run twice and compared bitwise, learnable buffers' gradients included (a
  // per-diagonal and a per-head one). Quick: one length.
  for (const char* name : {"full", "causal", "document:3", "sliding_window:100", "relbias(learnable)",
                           "alibi_slopes(learnable)+causal"})
    for (int64_t L : quick ? std::vector<int64_t>{129} : std::vector<int64_t>{1, 129, 1000})
      for (int64_t D : {64, 128, 256})
        cases.push_back({&corpus::corpus_entry(name), L, L, D, D, 4, 2, D == 64 ? 1 : 2, DType::BF16, true, true});
  if (!quick) {
    cases.push_back({&corpus[1], 4097, 4097, 128, 128, 2, 1, 1, DType::F16, true, true});
    cases.push_back({&corpus[4], 700, 1500, 128, 64, 4, 4, 2, DType::BF16, true, true});
  }
  // Position offsets: a chunk of a longer sequence (the last 129 queries against 1000 keys) and a
  // context-parallel piece (rows from 300, keys from 100), for the position-reading mods.
  for (const char* name : {"causal", "sliding_window:100", "alibi+causal", "relbias(learnable)"})
    for (int64_t D : {64, 128, 256}) {
      cases.push_back({&corpus::corpus_entry(name), 129, 1000, D, D, 4, 2, 1, DType::BF16, true, false, 871, 0});
      cases.push_back({&corpus::corpus_entry(name), 200, 300, D, D, 4, 4, 1, DType::BF16, true, false, 300, 100});
    }
  // A mask_mod without a block mask: every kv tile is a partial one, and at D = Dv = 64 the sm90 forward takes its tall
  // tile (only calls without a block mask do), whose ALiBi (the affine bias) has its own epilogue form (session 27).
  for (const char* name : {"alibi+causal", "causal", "document:3"})
    for (int64_t D : {64, 128}) {
      const int64_t L = quick ? quick_length(D) : 1000;
      cases.push_back({&corpus::corpus_entry(name), L, L, D, D, 4, 2, 1, DType::BF16, true, false, 0, 0, false});
    }

  // --deterministic and --only: keep the cases that pass both filters.
  auto wanted = [&](const Case& k) {
    if (deterministic_only && !k.deterministic) return false;
    if (only.empty()) return true;
    for (const std::string& o : only)
      if (k.mod->name.find(o) != std::string::npos) return true;
    return false;
  };
  cases.erase(std::remove_if(cases.begin(), cases.end(), [&](const Case& k) { return !wanted(k); }), cases.end());

  // Compile every distinct kernel set first, in parallel: NVRTC is single-threaded and the cases need
  // dozens of kernel sets (a few seconds each), which would otherwise dominate the run.
  {
    std::vector<std::function<void()>> jobs;
    std::set<std::string> seen;
    for (const Case& k : cases) {
      // cuda_forward runs these on the decode family unless FLEXATTN_DECODE=0 (docs/env_vars.md).
      const bool decode = k.L <= 64 && runtime::decode_forward_requested();
      const std::string id = k.mod->name + "/" + std::to_string(int(k.dtype)) + "/" + std::to_string(k.D) + "/" +
                             std::to_string(k.Dv) + "/" + std::to_string(k.backward) + (decode ? "/decode" : "") +
                             (k.block_mask ? "" : "/no-block-mask");
      if (!seen.insert(id).second) continue;
      jobs.push_back([k, decode] {
        try {
          corpus::BuiltVariant b = corpus::build_variant(*k.mod, mods::ProblemShape{k.B, k.Hq, k.Hkv, k.L, k.S, k.D, k.Dv, 1});
          compile_variant(b.variant, k.dtype, int(k.D), int(k.Dv), device_arch_string(), false, true);
          if (decode) compile_decode(b.variant, k.dtype, int(k.D), int(k.Dv), device_arch_string());
          if (k.backward) compile_variant(b.variant, k.dtype, int(k.D), int(k.Dv), device_arch_string(), true, true);
          // The Hopper families compile on first use otherwise (serially, seconds each): prewarm what
          // the dispatch will pick on this device with this environment.
          const std::string arch = device_arch_string();
          if (arch == "sm_90a" && runtime::sm90_forward_requested() && runtime::sm90_fwd_head_dim(int(k.D)) != 0 &&
              runtime::sm90_fwd_head_dim(int(k.Dv)) != 0)
            runtime::get_kernel_set(b.variant, runtime::sm90_fwd_call_key(k.dtype, int(k.D), int(k.Dv), arch,
                                                                          k.block_mask && !b.variant.mask_mod.empty()));
          const int bd = runtime::sm90_bwd_head_dim(int(k.D)), bdv = runtime::sm90_bwd_head_dim(int(k.Dv));
          if (arch == "sm_90a" && k.backward && runtime::sm90_backward_requested() && bd != 0 && bdv != 0 &&
              kern::sm90_bwd_head_dims_ok(bd, bdv))
            if (const auto key = runtime::sm90_bwd_call_key(k.dtype, int(k.D), int(k.Dv), arch, k.deterministic,
                                                            !b.variant.mask_mod.empty()))
              runtime::get_kernel_set(b.variant, *key);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "prewarm %s: %s\n", k.mod->name.c_str(), e.what());
        }
      });
    }
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    const unsigned n = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    for (unsigned t = 0; t < n; ++t)
      pool.emplace_back([&] {
        for (size_t i; (i = next.fetch_add(1)) < jobs.size();) jobs[i]();
      });
    for (auto& t : pool) t.join();
    std::fprintf(stderr, "prewarmed %zu kernel sets\n", jobs.size());
  }

  std::vector<Row> rows;
  int failed = 0;
  uint64_t seed = 1;
  for (const Case& k : cases) {
    rows.push_back(run_case(k, seed++));
    if (!rows.back().ok) ++failed;
    // A failure's errors go with its line too: a run cut short by a timeout never prints the table below.
    const Row& r = rows.back();
    if (r.ok) {
      std::fprintf(stderr, "PASS %s\n", r.label.c_str());
    } else {
      std::fprintf(stderr, "FAIL %s%s (out %.2e, lse %.2e, grads %.2e)\n", r.label.c_str(), r.why.c_str(), r.err_out,
                   r.err_lse, r.err_grad);
    }
  }
  std::printf("\n%-60s %9s %9s %9s  %s\n", "case", "out", "lse", "grads", "result");
  for (const Row& r : rows)
    std::printf("%-60s %9.2e %9.2e %9.2e  %s%s\n", r.label.c_str(), r.err_out, r.err_lse, r.err_grad,
                r.ok ? "PASS" : "FAIL", r.why.c_str());
  std::printf("\n%zu cases, %d failed\n", rows.size(), failed);
  return failed ? 1 : 0;
}
