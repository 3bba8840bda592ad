#include "jit/module.h"

#include <cstring>
#include <mutex>

#include "flexattn/error.h"

namespace flexattn::jit {

Module::Module(const std::string& cubin, const std::string& label) : label_(label) {
  const DriverApi& d = driver();
  cu_check(d.cuCtxGetCurrent(&ctx_), "cuCtxGetCurrent");
  check(ctx_ != nullptr, "Module " + label + ": no current CUDA context; call use_device(device) first");
  cu_check(d.cuModuleLoadData(&mod_, cubin.data()), "cuModuleLoadData (" + label + ")");
}

Module::~Module() {
  if (mod_) driver().cuModuleUnload(mod_);
}

CUfunction Module::function(const std::string& name) const {
  CUfunction f = nullptr;
  CUresult r = driver().cuModuleGetFunction(&f, mod_, name.c_str());
  check(r == CUDA_SUCCESS, "kernel name: '" + name + "' is not a function of " + label_ + " (" + cu_error_text(r) + ")");
  return f;
}

CUfunction get_function(const CompiledKernel& compiled, const std::string& name) {
  static std::mutex mu;
  static std::map<std::pair<std::string, CUcontext>, std::unique_ptr<Module>> modules;
  check(compiled.cubin && !compiled.cubin->empty(), "get_function: CompiledKernel '" + compiled.key + "' has no cubin");
  CUcontext ctx = nullptr;
  cu_check(driver().cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  std::lock_guard<std::mutex> lock(mu);
  auto& m = modules[{compiled.key, ctx}];
  if (!m) m = std::make_unique<Module>(*compiled.cubin, compiled.key);
  return m->function(name);
}

CUlaunchAttribute programmatic_launch_attribute() {
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  const int allowed = 1;
  std::memcpy(attr.value.pad, &allowed, sizeof allowed);
  return attr;
}

void launch(CUfunction f, const LaunchConfig& c, const void* params, size_t params_size) {
  const DriverApi& d = driver();
  auto positive = [](const Dim3& v) { return v.x > 0 && v.y > 0 && v.z > 0; };
  check(positive(c.grid), "LaunchConfig.grid: every dimension must be >= 1");
  check(positive(c.block), "LaunchConfig.block: every dimension must be >= 1");
  check(uint64_t(c.block.x) * c.block.y * c.block.z <= 1024, "LaunchConfig.block: at most 1024 threads per block");
  check(params != nullptr, "launch: params must point to the kernel's parameter struct");
  if (d.cuFuncGetParamInfo) {
    size_t offset = 0, size = 0;
    if (d.cuFuncGetParamInfo(f, 0, &offset, &size) == CUDA_SUCCESS)
      check(size == params_size, "launch: params is " + std::to_string(params_size) +
                                     " bytes but the kernel's parameter is " + std::to_string(size) +
                                     " bytes (host and device structs differ)");
  }
  constexpr size_t kDefaultSmemLimit = 48 * 1024;
  if (c.smem > kDefaultSmemLimit)
    cu_check(d.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(c.smem)),
             "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES = " + std::to_string(c.smem) + ")");
  void* args[] = {const_cast<void*>(params)};
  bool cluster = c.cluster.x * c.cluster.y * c.cluster.z > 1;
  if (c.programmatic && !cluster && d.cuLaunchKernelEx != nullptr) {
    CUlaunchAttribute attr = programmatic_launch_attribute();
    CUlaunchConfig cfg{c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z, unsigned(c.smem), c.stream, &attr, 1};
    cu_check(d.cuLaunchKernelEx(&cfg, f, args, nullptr), "cuLaunchKernelEx(programmatic)");
    return;
  }
  if (!cluster) {
    cu_check(d.cuLaunchKernel(f, c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z, unsigned(c.smem),
                              c.stream, args, nullptr),
             "cuLaunchKernel");
    return;
  }
  check(d.cuLaunchKernelEx != nullptr, "LaunchConfig.cluster: clusters need cuLaunchKernelEx (CUDA 12+ driver)");
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim = {c.cluster.x, c.cluster.y, c.cluster.z};
  CUlaunchConfig cfg{c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z, unsigned(c.smem), c.stream, &attr, 1};
  cu_check(d.cuLaunchKernelEx(&cfg, f, args, nullptr), "cuLaunchKernelEx");
}

int max_active_blocks_per_sm(CUfunction f, int block_threads, size_t smem) {
  int n = 0;
  cu_check(driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, block_threads, smem),
           "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  return n;
}

}  // namespace flexattn::jit
