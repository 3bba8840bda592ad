// flexattn cache list|clear|prewarm: the JIT kernel cache (src/jit).
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "flexattn/attention.h"
#include "flexattn/error.h"
#include "flexattn/jit.h"

namespace flexattn::cli {

namespace {

// Compiles the forward and backward kernels of the quick bench suite (bf16, head dim 128) for `arch`,
// the families a call would take there (on sm_90a the Hopper ones). Needs NVRTC only, not a GPU.
int prewarm(std::string arch) {
  if (arch.empty()) {
    const jit::JitInfo info = jit::jit_info();
    check(!info.devices.empty(), "cache prewarm: no GPU found to take the architecture from; give --arch (e.g. sm_90a)");
    arch = info.devices[0].arch;
  }
  for (const BenchCase& c : quick_suite()) {
    ProblemConfig config = bench_config(c, DType::BF16, 0);
    config.make_inputs = false;
    const Problem p = make_problem(config);
    const CompileReport f = compile_variant(p.variant, DType::BF16, 128, 128, arch, false);
    const CompileReport b = compile_variant(p.variant, DType::BF16, 128, 128, arch, true);
    std::printf("  %-16s %s\n  %-16s %s\n", c.name, f.key.c_str(), "", b.key.c_str());
  }
  std::printf("cache: prewarmed %zu variants for %s in %s\n", quick_suite().size(), arch.c_str(), jit::cache_dir().c_str());
  return 0;
}

}  // namespace

int cmd_cache(const std::vector<std::string>& argv) {
  Args args("cache", {{"--arch", "SM", false, "prewarm: target architecture, e.g. sm_80, sm_90a (default: GPU 0's)"}});
  args.parse(argv);
  if (args.help_requested()) {
    std::cout << "usage: flexattn cache list|clear|prewarm [--arch SM]\n"
                 "  list     the compiled kernels in the cache directory\n"
                 "  clear    remove every cached kernel\n"
                 "  prewarm  compile the kernels of the quick bench suite ahead of time (needs NVRTC, not a GPU)\n"
                 "The cache directory is FLEXATTN_CACHE_DIR, else $XDG_CACHE_HOME/flexattn, else ~/.cache/flexattn.\n\n"
                 "flags:\n"
              << args.usage();
    return 0;
  }
  const auto& pos = args.positional();
  check(!pos.empty(), "cache: missing action; expected list, clear or prewarm");
  check(pos.size() == 1, "cache: unexpected argument '" + (pos.size() > 1 ? pos[1] : "") + "'");
  const std::string& action = pos[0];
  check(action == "prewarm" || !args.has("--arch"), "--arch applies to 'cache prewarm' only");
  // A folder that does not exist (a typo in FLEXATTN_CACHE_DIR) or is a file read as "0 entries" with no word.
  const auto where = [] {
    std::error_code ec;
    const std::string dir = jit::cache_dir();
    if (!std::filesystem::exists(dir, ec)) return dir + ", which does not exist yet";
    if (!std::filesystem::is_directory(dir, ec)) return dir + ", which is not a folder (FLEXATTN_CACHE_DIR?)";
    return dir;
  };
  if (action == "list") {
    const auto entries = jit::cache_list();
    std::printf("cache: %s (%zu entries)\n", where().c_str(), entries.size());
    for (const jit::CacheEntry& e : entries)
      std::printf("  %-56s %-8s nvrtc %-6s %10lld bytes  %s%s\n", e.key.c_str(), e.arch.c_str(), e.nvrtc_version.c_str(),
                  (long long)e.bytes, e.created.c_str(), e.valid ? "" : "  (invalid)");
    return 0;
  }
  if (action == "clear") {
    const int n = jit::cache_clear();
    std::printf("cache: removed %d entries from %s\n", n, where().c_str());
    return 0;
  }
  if (action == "prewarm") return prewarm(args.get("--arch"));
  throw Error("cache: unknown action '" + action + "'; expected list, clear or prewarm");
}

}  // namespace flexattn::cli
