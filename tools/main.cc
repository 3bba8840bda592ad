// flexattn: the command-line tool (`make run` runs `flexattn bench --suite quick`).
// Bad input of any kind ends with one line "flexattn: error: ..." on stderr and exit code 2.
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>

#include "commands.h"
#include "flexattn/error.h"

namespace {

const char* kUsage = R"(usage: flexattn <command> [flags]   (flexattn <command> --help for its flags)
commands:
  info                  library version, CUDA driver / NVRTC / GPUs found, kernel cache
  run                   run one attention problem (cpu reference or cuda), --check verifies it
  mask                  build a block mask and print it (ascii), its sparsity and block counts
  bench --suite quick   a short table of variants: backend, max error vs the reference, time
  cache list|clear      the JIT kernel cache
)";

// The message on one line, whatever the thrower put in it.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

int fail(const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "flexattn: error: %s\n", one_line(message).c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace flexattn::cli;
  if (argc < 2) return fail("missing command; expected one of info, run, mask, bench, cache (see flexattn --help)");
  const std::string command = argv[1];
  if (command == "-h" || command == "--help" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  const std::vector<std::string> rest(argv + 2, argv + argc);
  try {
    if (command == "info") return cmd_info(rest);
    if (command == "run") return cmd_run(rest);
    if (command == "mask") return cmd_mask(rest);
    if (command == "bench") return cmd_bench(rest);
    if (command == "cache") return cmd_cache(rest);
    return fail("unknown command '" + command + "'; expected one of info, run, mask, bench, cache");
  } catch (const flexattn::Error& e) {
    return fail(e.what());
  } catch (const std::bad_alloc&) {
    return fail("out of memory (try smaller shapes)");
  } catch (const std::exception& e) {
    return fail(std::string("internal error: ") + e.what());
  }
}
