// flexattn run: one attention problem on a backend, with optional checks and .npy output.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "execute.h"
#include "flexattn/error.h"
#include "flexattn/mods.h"
#include "flexattn/npy.h"

namespace flexattn::cli {

namespace fs = std::filesystem;

namespace {

const char* kRunHelp = R"(usage: flexattn run [flags]
Runs attention out = softmax(mask(score_mod(q k^T / sqrt(D)))) v on random normal inputs (or --load),
prints timings and a summary of the outputs.

--check on the cuda backend compares every output with the CPU reference (exact double math): out and
  lse within 4x the error of a naive evaluation in the input dtype (torch eager's arithmetic: f32
  scores, P rounded to the dtype), at least 1e-5 relative; gradients within 2e-2 (bf16) / 4e-3 (f16),
  or 4x the error of the exact backward whose delta reads that naive evaluation's out, if larger
  (gradients summed with cancellation, such as ALiBi slopes, are that sensitive to the stored out).
  A mod with tanh_approx (the GPU's tanh.approx.f32, ~2^-11 relative) is measured against a naive
  evaluation whose tanh_approx is that much off, not against exact tanh.
--check on the cpu backend verifies the CPU reference independently:
  forward:  out and lse against a separate dense evaluation in double precision that ignores the block
            mask (so the block mask and the reference's softmax are checked), tolerance 1e-9 relative;
  backward: dq, dk, dv and every buffer gradient against central finite differences of
            sum(out * dout) at 4 seeded entries per tensor, tolerance 1e-6 relative (assumes the
            score_mod is smooth there).
  Both sides evaluate the mods with the same IR interpreter, which this check therefore trusts.
  Errors are max |got - want| and that divided by max |want|. Exit code 1 if a check fails.
--save DIR writes q, k, v, out, lse (and with --backward dout, dq, dk, dv) as .npy, plus
  buffer_<name>.npy for every buffer and dbuffer_<name>.npy for every buffer gradient. bf16 arrays are
  written as float32 holding the exact bf16 values; lse and buffer gradients are float32.
--load DIR reads q.npy, k.npy, v.npy (and dout.npy, buffer_<name>.npy when present); shapes come from
  the files and given shape flags must agree with them.
Float buffers read only by the score_mod get gradients with --backward.

flags:
)";

void save(const std::string& dir, const std::string& name, const HostTensor& t, DType dtype) {
  npy::write((fs::path(dir) / (name + ".npy")).string(), cast_tensor(t, dtype));
}

void summarize(const char* name, const HostTensor& t) {
  double sum = 0, abs_sum = 0;
  int64_t finite = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double x = t.get(i);
    if (!std::isfinite(x)) continue;
    sum += x, abs_sum += std::fabs(x), ++finite;
  }
  std::printf("%-6s shape %s  sum %.6e  mean|x| %.6e  non-finite %lld\n", name, shape_string(t.shape).c_str(), sum,
              finite ? abs_sum / double(finite) : 0.0, (long long)(t.numel() - finite));
}

}  // namespace

int cmd_run(const std::vector<std::string>& argv) {
  std::vector<FlagSpec> flags = problem_flags();
  flags.push_back({"--backend", "cpu|cuda|auto", false, "where to run (default auto: cuda when usable and --dtype is bf16/f16, else cpu)"});
  flags.push_back({"--backward", "", false, "also run the backward with a random dout"});
  flags.push_back({"--deterministic", "", false, "cuda backward: the deterministic mode (bitwise identical dq/dk/dv and buffer gradients run to run)"});
  flags.push_back({"--check", "", false, "verify the outputs (see above)"});
  flags.push_back({"--save", "DIR", false, "write inputs and outputs as .npy files into DIR"});
  flags.push_back({"--block", "N", false, "block-mask block size (default 128)"});
  Args args("run", flags);
  args.parse(argv);
  if (args.help_requested()) {
    std::cout << kRunHelp << args.usage() << "\nmods (--mask / --score NAME[:ARGS]):\n" << registry_help();
    return 0;
  }
  reject_positional(args, "run");
  const int block = int(args.get_int("--block", 128, 1, 1 << 20));
  ProblemConfig config = problem_config(args);
  std::string backend_note;
  const std::string backend = resolve_backend(args.get("--backend", "auto"), config.dtype, &backend_note);
  config.backward = args.has("--backward");
  const std::string save_dir = args.get("--save");
  const Problem p = make_problem(config);
  if (!save_dir.empty()) {
    std::error_code ec;
    fs::create_directories(save_dir, ec);
    check(!ec && fs::is_directory(save_dir), "--save " + save_dir + ": cannot create the directory" +
                                                 (ec ? ": " + ec.message() : std::string()));
  }
  const auto& s = p.shape;
  std::printf("flexattn run: B=%lld H=%lld Hkv=%lld Q=%lld KV=%lld D=%lld Dv=%lld dtype=%s backend=%s seed=%llu\n",
              (long long)s.B, (long long)s.H, (long long)s.Hkv, (long long)s.Q, (long long)s.KV, (long long)s.D,
              (long long)s.Dv, std::string(dtype_name(p.dtype)).c_str(), backend.c_str(),
              (unsigned long long)s.seed);
  std::printf("variant: %s\n", p.label.c_str());
  if (!backend_note.empty()) std::printf("backend %s\n", backend_note.c_str());
  // On cuda the first call compiles; the reported time is the median of the following ones.
  const bool deterministic = args.has("--deterministic");
  check(!deterministic || config.backward, "--deterministic applies to the backward: give --backward too");
  const Execution e = execute(p, backend, block, config.backward, backend == "cuda" ? 5 : 0, deterministic);
  if (e.block_mask) {
    const BlockMaskStats st = block_mask_stats(*e.block_mask);
    std::printf("block mask: %dx%d blocks, %lld partial + %lld full of %lld tiles, sparsity %.2f%% (%.2f ms)\n", block,
                block, (long long)st.partial, (long long)st.full, (long long)st.total, sparsity(*e.block_mask),
                e.block_mask_ms);
  }
  std::printf("forward (%s): %.3f ms\n", backend.c_str(), e.forward_ms);
  summarize("out", e.out);
  summarize("lse", e.lse);
  if (config.backward) {
    std::printf("backward (%s): %.3f ms\n", backend.c_str(), e.backward_ms);
    summarize("dq", e.dq);
    summarize("dk", e.dk);
    summarize("dv", e.dv);
    for (const auto& [name, g] : e.dbuffers) summarize(("d" + name).c_str(), g);
  }
  if (!save_dir.empty()) {
    save(save_dir, "q", p.q, p.dtype);
    save(save_dir, "k", p.k, p.dtype);
    save(save_dir, "v", p.v, p.dtype);
    save(save_dir, "out", e.out, p.dtype);
    save(save_dir, "lse", e.lse, DType::F32);
    for (const auto& [name, t] : p.buffers) save(save_dir, "buffer_" + name, t, t.dtype);
    if (config.backward) {
      save(save_dir, "dout", p.dout, p.dtype);
      save(save_dir, "dq", e.dq, p.dtype);
      save(save_dir, "dk", e.dk, p.dtype);
      save(save_dir, "dv", e.dv, p.dtype);
      for (const auto& [name, g] : e.dbuffers) save(save_dir, "dbuffer_" + name, g, DType::F32);
    }
    std::printf("saved to %s\n", save_dir.c_str());
  }
  if (!args.has("--check")) return 0;
  const CheckReport r = check_execution(p, e, config.backward);
  std::printf("check forward: %s\n", r.forward_what.c_str());
  for (const Discrepancy& d : r.forward) std::printf("  %s\n", format(d).c_str());
  if (config.backward) {
    std::printf("check backward: %s\n", r.backward_what.c_str());
    for (const Discrepancy& d : r.backward) std::printf("  %s\n", format(d).c_str());
  }
  std::printf("check: %s\n", r.ok() ? "ok" : "FAILED");
  if (!r.ok()) {
    std::fflush(stdout);
    std::fprintf(stderr, "flexattn: check failed (worst relative error %.3e)\n", r.worst_rel());
    return 1;
  }
  return 0;
}

}  // namespace flexattn::cli
