// flexattn info: what this build and machine offer.
#include <iostream>

#include "commands.h"
#include "flexattn/attention.h"
#include "flexattn/jit.h"
#include "flexattn/mods.h"

namespace flexattn::cli {

int cmd_info(const std::vector<std::string>& argv) {
  Args args("info", {});
  args.parse(argv);
  if (args.help_requested()) {
    std::cout << "usage: flexattn info\nPrints the library version, the CUDA driver, NVRTC and GPUs found, the kernel "
                 "cache, and the mod library.\n";
    return 0;
  }
  reject_positional(args, "info");
  std::cout << jit::format_jit_info(jit::jit_info());
  std::string why;
  std::cout << "backends: cpu (reference), cuda: " << (cuda_available(&why) ? "available (bf16, f16)" : "unavailable (" + why + ")")
            << "\n";
  std::cout << "mod library:\n" << registry_help();
  return 0;
}

}  // namespace flexattn::cli
