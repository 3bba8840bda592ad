#pragma once
// Loading cubins into a device context and launching their kernels. Every flexattn kernel takes one
// parameter struct by value (extern "C" __global__ void k(const AttnParams p)), so a launch passes
// exactly one argument: a pointer to the host copy of that struct.
#include <map>
#include <memory>
#include <string>

#include "flexattn/jit.h"
#include "jit/driver_api.h"

namespace flexattn::jit {

// A cubin loaded into the context current at construction (see use_device).
class Module {
 public:
  explicit Module(const std::string& cubin, const std::string& label = "module");
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  // Throws flexattn::Error naming `name` and the module when the function does not exist.
  CUfunction function(const std::string& name) const;

 private:
  CUmodule mod_ = nullptr;
  CUcontext ctx_ = nullptr;
  std::string label_;
};

// A kernel of `compiled`, loaded into the current context. Modules are loaded once per (key, context)
// and stay loaded for the life of the process.
CUfunction get_function(const CompiledKernel& compiled, const std::string& name);

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct LaunchConfig {
  Dim3 grid, block;
  size_t smem = 0;          // dynamic shared memory, bytes
  CUstream stream = nullptr;
  Dim3 cluster;             // thread-block cluster (sm_90+); {1,1,1} = none
  // A programmatic dependent of the stream's previous kernel (sm_90+): it may start once every CTA of that kernel has
  // run griddepcontrol.launch_dependents, and must run griddepcontrol.wait before it relies on that kernel's work or
  // completion. Without cuLaunchKernelEx (drivers before CUDA 12) an ordinary launch, which is also correct.
  bool programmatic = false;
};

// The launch attribute that makes a cuLaunchKernelEx launch a programmatic dependent (LaunchConfig::programmatic).
CUlaunchAttribute programmatic_launch_attribute();

// Launches f(params). Raises the function's dynamic-smem limit when smem exceeds the 48 KiB default.
// When the driver can report parameter sizes (CUDA 12.4+), checks that `params_size` equals the
// kernel's parameter: a host/device struct mismatch is an Error, not a silent misread.
void launch(CUfunction f, const LaunchConfig& config, const void* params, size_t params_size);

template <class Params>
void launch(CUfunction f, const LaunchConfig& config, const Params& params) {
  launch(f, config, &params, sizeof(Params));
}

// Blocks per SM the kernel can keep resident with `block_threads` threads and `smem` dynamic bytes.
int max_active_blocks_per_sm(CUfunction f, int block_threads, size_t smem);

}  // namespace flexattn::jit
