// flexattn bench --suite quick: the `make run` job. A short suite of variants, each run forward and
// backward on the chosen backend and checked (see check.h for what is compared on the cpu backend).
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "execute.h"
#include "flexattn/error.h"

namespace flexattn::cli {

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
  Args args("bench", {{"--suite", "NAME", false, "the suite to run (quick)"},
                      {"--backend", "cpu|cuda|auto", false, "where to run (default auto)"},
                      {"--seed", "N", false, "seed of the inputs (default 0)"}});
  args.parse(argv);
  if (args.help_requested()) {
    std::cout << "usage: flexattn bench --suite quick [flags]\n"
                 "Runs a short suite of variants (B=1 H=4 Q=KV=256 D=64; f32 on cpu, bf16 on cuda) forward and\n"
                 "backward and prints, per variant, the largest relative error of the check and the time (cuda: the\n"
                 "median of 10 calls after the compiling one). On the cpu backend the check is the one of\n"
                 "`flexattn run --check` (reference vs a dense double evaluation, gradients vs finite differences);\n"
                 "on cuda it compares the backend with the cpu reference.\n\nflags:\n"
              << args.usage();
    return 0;
  }
  reject_positional(args, "bench");
  const std::string suite = args.get("--suite", "quick");
  check(suite == "quick", "--suite: unknown suite '" + suite + "'; expected quick");
  std::string note;
  const std::string backend = resolve_backend(args.get("--backend", "auto"), DType::BF16, &note);
  const DType dtype = backend == "cuda" ? DType::BF16 : DType::F32;
  const uint64_t seed = args.get_u64("--seed", 0);

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
