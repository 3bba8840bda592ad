#pragma once
// How the sm90 forward compile tests compile a generated source directly (bypassing the kernel-set cache,
// which is keyed without the FLEXATTN_SM90_* switches the source generator reads).
#include <string>

#include "flexattn/jit.h"

namespace flexattn::sm90_test {

// flexattn_fwd of `source` for sm_90a under `prefix` (the disk cache is keyed by the source).
inline jit::CompiledKernel compile_fwd_source(const std::string& prefix, const std::string& source) {
  jit::KernelRequest req;
  req.prefix = prefix;
  req.source = source;
  req.arch = "sm_90a";
  req.kernel_names = {"flexattn_fwd"};
  return jit::get_or_compile(req);
}

}  // namespace flexattn::sm90_test
