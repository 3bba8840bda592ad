#pragma once
// A kernel that does not depend on the call (the block-mask compact kernel, the exact buffer-gradient rounding
// kernel, a mask's classify kernel), compiled once per process and arch into `by_arch` under `mu`. The compile runs
// outside the lock (two first calls may both compile; the JIT's disk cache makes the second a load, and the first
// entry stays); `request` is called only when this process has not compiled it yet.
#include <map>
#include <mutex>
#include <string>

#include "flexattn/jit.h"

namespace flexattn::jit {

template <class MakeRequest>
CompiledKernel once_per_arch(std::mutex& mu, std::map<std::string, CompiledKernel>& by_arch, const std::string& arch,
                             MakeRequest request) {
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = by_arch.find(arch);
    if (it != by_arch.end()) return it->second;
  }
  CompiledKernel c = get_or_compile(request());
  std::lock_guard<std::mutex> lock(mu);
  return by_arch.emplace(arch, std::move(c)).first->second;
}

}  // namespace flexattn::jit
