// flexattn bench --suite quick: the `make run` job. A short suite of variants, each run forward and
// backward on the chosen backend and checked (see check.h for what is compared on the cpu backend).
// --suite short | full: bench/run.py's side-by-side cases and shapes, flexattn alone on the cuda
// backend, timed only (a cpu reference at S=8192 takes minutes); bench/run.py adds the peers.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "commands.h"
#include "execute.h"
#include "flexattn/error.h"
#include "flexattn/expr.h"

namespace flexattn::cli {

// bench/run.py's cases in the registry's terms. document: 8 equal documents, causal (run.py splits at
// seeded random points, which would need a buffer file); the density printed is this mask's own.
std::vector<PeerCase> peer_cases(int64_t S) {
  const std::string doc = std::to_string(std::max<int64_t>(S / 8, 1));
  return {{"full", "", "", ""},
          {"causal", "causal", "", ""},
          {"sliding1024", "sliding_window:1023", "", ""},  // 1024 keys per query, as run.py's
          {"document", "", "q_idx // " + doc + " == kv_idx // " + doc + " && q_idx >= kv_idx", ""},
          {"prefixlm", "prefix_lm:" + std::to_string(S / 4), "", ""},
          {"alibi_causal", "causal", "", "alibi"},
          {"softcap_causal", "causal", "", "softcap:30"},
          {"relbias_full", "", "", "relbias"}};
}

double attended_entries(const Problem& p, const BlockMask* bm) {
  const double all_bh = double(p.shape.B) * double(p.shape.H);
  if (bm == nullptr) return all_bh * double(p.shape.Q) * double(p.shape.KV);
  const ModBindings binds = p.bindings();
  const ir::EvalEnv env = eval_env(binds);
  ir::Evaluator ev(p.variant.mask_mod);
  ev.bind(env);
  double total = 0;
  for (int64_t b = 0; b < bm->B; ++b)
    for (int64_t h = 0; h < bm->H; ++h)
      for (int64_t qb = 0; qb < bm->nq; ++qb) {
        const int64_t row = (b * bm->H + h) * bm->nq + qb;
        const int64_t q0 = qb * bm->q_block, q1 = std::min(q0 + bm->q_block, bm->q_len);
        auto kv_range = [&](int32_t kvb) {
          const int64_t k0 = int64_t(kvb) * bm->kv_block;
          return std::pair<int64_t, int64_t>{k0, std::min(k0 + bm->kv_block, bm->kv_len)};
        };
        for (int32_t i = 0; bm->has_full && i < bm->full_kv_num_blocks[row]; ++i) {
          const auto [k0, k1] = kv_range(bm->full_kv_indices[row * bm->nkv + i]);
          total += double(q1 - q0) * double(k1 - k0);
        }
        for (int32_t i = 0; i < bm->kv_num_blocks[row]; ++i) {
          const auto [k0, k1] = kv_range(bm->kv_indices[row * bm->nkv + i]);
          for (int64_t q = q0; q < q1; ++q)
            for (int64_t kv = k0; kv < k1; ++kv) total += ev.run(0.0, b, h, q, kv).as_bool() ? 1 : 0;
        }
      }
  return total * (all_bh / (double(bm->B) * double(bm->H)));
}

namespace {

struct PeerShape {
  int64_t B, H, S, D;
};

std::vector<PeerShape> peer_shapes(const std::string& suite) {
  if (suite == "short") return {{4, 16, 2048, 128}};
  if (suite == "short64") return {{4, 16, 2048, 64}};
  if (suite == "long") return {{2, 16, 8192, 128}, {2, 16, 8192, 64}};  // issue 5 / 6 targets' shape
  return {{2, 16, 8192, 128}, {2, 16, 8192, 64}, {4, 16, 2048, 128}, {4, 16, 2048, 64}};
}

int run_peer_suite(const std::string& suite, const std::string& requested, uint64_t seed) {
  std::string note;
  const std::string resolved = resolve_backend(requested, DType::BF16, &note);
  check(resolved == "cuda", "--suite " + suite + ": runs on the cuda backend only (a cpu reference at these sizes "
                            "takes minutes)" + (note.empty() ? "" : "; " + note));
  constexpr int kReps = 20;
  std::printf("flexattn bench --suite %s: bf16, backend %s, median of %d calls after the first; TFLOP/s over "
              "attended entries (forward 4*D flops each, backward 2.5x)\n",
              suite.c_str(), resolved.c_str(), kReps);
  std::printf("%-16s %-14s %4s %8s %10s %8s %10s %8s\n", "case", "BxHxS", "D", "density", "fwd ms", "TFLOP/s",
              "bwd ms", "TFLOP/s");
  for (const PeerShape& s : peer_shapes(suite)) {
    for (const PeerCase& c : peer_cases(s.S)) {
      ProblemConfig config;
      config.B = s.B, config.H = s.H, config.Q = s.S, config.D = s.D;
      config.dtype = DType::BF16;
      config.mask_spec = c.mask, config.mask_expr = c.mask_expr, config.score_spec = c.score;
      config.seed = seed;
      config.backward = true;
      const Problem p = make_problem(config);
      const Execution e = execute(p, resolved, 128, true, kReps);
      const double entries = attended_entries(p, e.block_mask ? &*e.block_mask : nullptr);
      const double fwd_flops = 4.0 * double(s.D) * entries;
      std::printf("%-16s %-14s %4lld %8.3f %10.3f %8.0f %10.3f %8.0f\n", c.name.c_str(),
                  (std::to_string(s.B) + "x" + std::to_string(s.H) + "x" + std::to_string(s.S)).c_str(),
                  static_cast<long long>(s.D), entries / (double(s.B * s.H) * double(s.S) * double(s.S)),
                  e.forward_ms, fwd_flops / (e.forward_ms * 1e9), e.backward_ms,
                  2.5 * fwd_flops / (e.backward_ms * 1e9));
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

// Small enough that the whole suite (reference, dense check, finite differences) runs in seconds on
// two cores; every library mod family and one text mod appear once.
const std::vector<BenchCase>& quick_suite() {
  static const std::vector<BenchCase> suite = {
      {"causal", "causal", "", "", "", -1},
      {"sliding_window", "sliding_window:64", "", "", "", -1},
      {"document", "document:4", "", "", "", -1},
      {"prefix_lm", "prefix_lm:96", "", "", "", -1},
      {"chunked", "chunked:64", "", "", "", -1},
      {"dilated", "dilated:3", "", "", "", -1},
      {"softcap+causal", "causal", "", "softcap:30", "", -1},
      {"alibi+causal", "causal", "", "alibi", "", -1},
      {"relbias", "", "", "relbias", "", -1},
      {"t5", "", "", "t5:32:128", "", -1},
      {"gqa+causal", "causal", "", "", "", 2},
      {"text mod", "", "q_idx >= kv_idx && kv_idx % 5 != 4", "", "score * sigmoid(score) - 0.01 * (q_idx - kv_idx)", -1},
  };
  return suite;
}

ProblemConfig bench_config(const BenchCase& c, DType dtype, uint64_t seed) {
  ProblemConfig config;
  config.B = 1, config.H = 4, config.Hkv = c.hkv, config.Q = 256, config.D = 64;
  config.dtype = dtype;
  config.mask_spec = c.mask, config.mask_expr = c.mask_expr;
  config.score_spec = c.score, config.score_expr = c.score_expr;
  config.seed = seed;
  config.backward = true;
  return config;
}

int cmd_bench(const std::vector<std::string>& argv) {
  Args args("bench", {{"--suite", "NAME", false, "quick (default), short, short64, long, full or decode"},
                      {"--backend", "cpu|cuda|auto", false, "where to run (default auto)"},
                      {"--seed", "N", false, "seed of the inputs (default 0)"},
                      {"--splits", "LIST", false, "decode: kv split counts to time each shape at (0 = auto, the default)"},
                      {"--batch", "B", false, "decode: only the shapes of batch B (8: 8x8k, 1: 1x128k, 64: 64x4k)"},
                      {"--shuffle", "", false, "decode: scatter the paged shapes' pages randomly over the pool"}});
  args.parse(argv);
  if (args.help_requested()) {
    std::cout << "usage: flexattn bench --suite quick|short|short64|long|full|decode [flags]\n"
                 "quick: a short suite of variants (B=1 H=4 Q=KV=256 D=64; f32 on cpu, bf16 on cuda) forward and\n"
                 "backward; prints, per variant, the largest relative error of the check and the time (cuda: the\n"
                 "median of 10 calls after the compiling one). On the cpu backend the check is the one of\n"
                 "`flexattn run --check` (reference vs a dense double evaluation, gradients vs finite differences);\n"
                 "on cuda it compares the backend with the cpu reference.\n"
                 "short, full: bench/run.py's cases (full, causal, sliding1024, document, prefixlm, alibi_causal,\n"
                 "softcap_causal, relbias_full) at its shapes (short: B=4 H=16 S=2048 D=128; short64: the same at D=64;\n"
                 "long: B=2 H=16 S=8192 at D=128 and 64; full: short, short64 and long), bf16 on cuda only, timed, not checked. bench/run.py adds torch and SDPA.\n"
                 "decode: the decode kernels on issue 7's shapes (Hq=32 Hkv=8 D=128, B x S = 8x8k, 1x128k, 64x4k),\n"
                 "contiguous and paged (16, 128), timed per call (host included); GB/s of K+V read, the mean time of\n"
                 "20 calls back to back (GPU time), then JSON rows. --splits LIST: each shape at several split counts;\n"
                 "--batch B: only the shapes of that batch (a quicker sweep); --shuffle: random page tables.\n\nflags:\n"
              << args.usage();
    return 0;
  }
  reject_positional(args, "bench");
  const std::string suite = args.get("--suite", "quick");
  check(suite == "quick" || suite == "short" || suite == "short64" || suite == "long" || suite == "full" ||
            suite == "decode",
        "--suite: unknown suite '" + suite + "'; expected quick, short, short64, long, full or decode");
  // Flags of one suite given to another were ignored without a word (--batch 3 with the quick suite).
  for (const char* flag : {"--splits", "--batch", "--shuffle"})
    check(suite == "decode" || !args.has(flag), std::string(flag) + " applies to --suite decode only");
  check(suite != "decode" || !args.has("--seed"), "--seed does not apply to --suite decode (fixed inputs)");
  check(suite != "decode" || args.get("--backend", "auto") != "cpu",
        "--backend cpu does not apply to --suite decode: it times the cuda decode kernels");
  if (suite == "decode") {  // tools/bench_decode.cc
    std::vector<int> splits;
    const std::string list = args.get("--splits", "0");
    for (size_t i = 0; i <= list.size();) {
      const size_t j = std::min(list.find(',', i), list.size());
      const std::string item = list.substr(i, j - i);
      char* end = nullptr;
      const long n = std::strtol(item.c_str(), &end, 10);
      check(!item.empty() && *end == '\0' && n >= 0 && n <= 128,
            "--splits: expected a comma-separated list of 0..128, got '" + list + "'");
      splits.push_back(int(n));
      i = j + 1;
    }
    const uint64_t batch = args.get_u64("--batch", 0);
    return run_decode_suite(splits, int64_t(batch), args.has("--shuffle"));
  }
  const uint64_t seed = args.get_u64("--seed", 0);
  if (suite != "quick") return run_peer_suite(suite, args.get("--backend", "auto"), seed);
  std::string note;
  const std::string backend = resolve_backend(args.get("--backend", "auto"), DType::BF16, &note);
  const DType dtype = backend == "cuda" ? DType::BF16 : DType::F32;

  std::printf("flexattn bench --suite quick: B=1 H=4 Q=KV=256 D=64 %s, backend %s%s\n",
              std::string(dtype_name(dtype)).c_str(), backend.c_str(), note.empty() ? "" : (" (" + note + ")").c_str());
  std::printf("%-16s %-8s %12s %12s %10s %10s  %s\n", "variant", "backend", "fwd rel err", "bwd rel err", "fwd ms",
              "bwd ms", "status");
  bool all_ok = true;
  for (const BenchCase& c : quick_suite()) {
    const ProblemConfig config = bench_config(c, dtype, seed);
    const Problem p = make_problem(config);
    const Execution e = execute(p, backend, 128, true, backend == "cuda" ? 10 : 0);
    const CheckReport r = check_execution(p, e, true);
    double fwd = 0, bwd = 0;
    for (const Discrepancy& d : r.forward) fwd = std::max(fwd, d.rel);
    for (const Discrepancy& d : r.backward) bwd = std::max(bwd, d.rel);
    all_ok = all_ok && r.ok();
    std::printf("%-16s %-8s %12.3e %12.3e %10.3f %10.3f  %s\n", c.name, backend.c_str(), fwd, bwd, e.forward_ms,
                e.backward_ms, r.ok() ? "ok" : "FAILED");
    std::fflush(stdout);
  }
  std::printf("%s\n", all_ok ? "all variants ok" : "some variants FAILED");
  return all_ok ? 0 : 1;
}

}  // namespace flexattn::cli
