#include <map>
#include <memory>
#include <mutex>

#include "flexattn/error.h"
#include "jit/driver_api.h"
#include "jit/sys.h"

namespace flexattn::jit {
namespace {

constexpr const char* kDefaultLibcuda = "libcuda.so.1";

struct LoadResult {
  DriverApi api{};
  std::string error;  // empty when usable
};


std::unique_ptr<LoadResult> load(const std::string& path) {
  auto r = std::make_unique<LoadResult>();
  std::string err;
  void* lib = open_library(path, &err);
  if (!lib) {
    r->error = "CUDA driver not found (" + path + "): " + err + "; the cuda backend needs an NVIDIA driver" +
               (path == kDefaultLibcuda ? "" : " (path from FLEXATTN_LIBCUDA)");
    return r;
  }
  DriverApi& a = r->api;
  a.path = library_path_of(find_symbol(lib, "cuInit"));
  if (a.path.empty()) a.path = path;
  std::string missing;
  // Versioned names (_v2) are the ones cuda.h maps the plain names to since CUDA 4/11.
  bind_symbol(lib, "cuInit", a.cuInit, true, missing);
  bind_symbol(lib, "cuDriverGetVersion", a.cuDriverGetVersion, true, missing);
  bind_symbol(lib, "cuGetErrorString", a.cuGetErrorString, true, missing);
  bind_symbol(lib, "cuGetErrorName", a.cuGetErrorName, true, missing);
  bind_symbol(lib, "cuDeviceGet", a.cuDeviceGet, true, missing);
  bind_symbol(lib, "cuDeviceGetCount", a.cuDeviceGetCount, true, missing);
  bind_symbol(lib, "cuDeviceGetAttribute", a.cuDeviceGetAttribute, true, missing);
  bind_symbol(lib, "cuDeviceGetName", a.cuDeviceGetName, true, missing);
  bind_symbol(lib, "cuDeviceTotalMem_v2", a.cuDeviceTotalMem, true, missing);
  bind_symbol(lib, "cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain, true, missing);
  bind_symbol(lib, "cuCtxSetCurrent", a.cuCtxSetCurrent, true, missing);
  bind_symbol(lib, "cuCtxGetCurrent", a.cuCtxGetCurrent, true, missing);
  bind_symbol(lib, "cuCtxGetDevice", a.cuCtxGetDevice, true, missing);
  bind_symbol(lib, "cuCtxSynchronize", a.cuCtxSynchronize, true, missing);
  bind_symbol(lib, "cuModuleLoadData", a.cuModuleLoadData, true, missing);
  bind_symbol(lib, "cuModuleUnload", a.cuModuleUnload, true, missing);
  bind_symbol(lib, "cuModuleGetFunction", a.cuModuleGetFunction, true, missing);
  bind_symbol(lib, "cuFuncSetAttribute", a.cuFuncSetAttribute, true, missing);
  bind_symbol(lib, "cuFuncGetAttribute", a.cuFuncGetAttribute, true, missing);
  bind_symbol(lib, "cuLaunchKernel", a.cuLaunchKernel, true, missing);
  bind_symbol(lib, "cuLaunchKernelEx", a.cuLaunchKernelEx, false, missing);
  bind_symbol(lib, "cuFuncGetParamInfo", a.cuFuncGetParamInfo, false, missing);
  bind_symbol(lib, "cuOccupancyMaxActiveClusters", a.cuOccupancyMaxActiveClusters, false, missing);
  bind_symbol(lib, "cuOccupancyMaxActiveBlocksPerMultiprocessor", a.cuOccupancyMaxActiveBlocksPerMultiprocessor, true,
       missing);
  bind_symbol(lib, "cuMemAlloc_v2", a.cuMemAlloc, true, missing);
  bind_symbol(lib, "cuMemFree_v2", a.cuMemFree, true, missing);
  bind_symbol(lib, "cuMemcpyHtoD_v2", a.cuMemcpyHtoD, true, missing);
  bind_symbol(lib, "cuMemcpyHtoDAsync_v2", a.cuMemcpyHtoDAsync, true, missing);
  bind_symbol(lib, "cuMemcpyDtoH_v2", a.cuMemcpyDtoH, true, missing);
  bind_symbol(lib, "cuMemcpyDtoDAsync_v2", a.cuMemcpyDtoDAsync, true, missing);
  bind_symbol(lib, "cuMemsetD8_v2", a.cuMemsetD8, true, missing);
  bind_symbol(lib, "cuMemsetD8Async", a.cuMemsetD8Async, true, missing);
  bind_symbol(lib, "cuStreamCreate", a.cuStreamCreate, true, missing);
  bind_symbol(lib, "cuStreamSynchronize", a.cuStreamSynchronize, true, missing);
  bind_symbol(lib, "cuStreamDestroy_v2", a.cuStreamDestroy, true, missing);
  bind_symbol(lib, "cuEventCreate", a.cuEventCreate, true, missing);
  bind_symbol(lib, "cuEventRecord", a.cuEventRecord, true, missing);
  bind_symbol(lib, "cuEventSynchronize", a.cuEventSynchronize, true, missing);
  bind_symbol(lib, "cuEventElapsedTime", a.cuEventElapsedTime, true, missing);
  bind_symbol(lib, "cuEventDestroy_v2", a.cuEventDestroy, true, missing);
  bind_symbol(lib, "cuStreamWaitEvent", a.cuStreamWaitEvent, false, missing);
  bind_symbol(lib, "cuTensorMapEncodeTiled", a.cuTensorMapEncodeTiled, false, missing);
  bind_symbol(lib, "cuStreamBeginCapture_v2", a.cuStreamBeginCapture, false, missing);
  bind_symbol(lib, "cuStreamEndCapture", a.cuStreamEndCapture, false, missing);
  bind_symbol(lib, "cuStreamIsCapturing", a.cuStreamIsCapturing, false, missing);
  bind_symbol(lib, "cuGraphInstantiateWithFlags", a.cuGraphInstantiateWithFlags, false, missing);
  bind_symbol(lib, "cuGraphLaunch", a.cuGraphLaunch, false, missing);
  bind_symbol(lib, "cuGraphExecDestroy", a.cuGraphExecDestroy, false, missing);
  bind_symbol(lib, "cuGraphDestroy", a.cuGraphDestroy, false, missing);
  if (!missing.empty()) {
    r->error = "CUDA driver " + a.path + " lacks entry points flexattn needs (" + missing +
               "); the cuda backend needs a newer NVIDIA driver";
    return r;
  }
  CUresult rc = a.cuInit(0);
  if (rc != CUDA_SUCCESS) {
    const char* name = nullptr;
    a.cuGetErrorName(rc, &name);
    r->error = "CUDA driver " + a.path + " loaded but cuInit failed: " + (name ? name : std::to_string(rc)) +
               "; the cuda backend needs a visible NVIDIA GPU";
  }
  return r;
}

const LoadResult& cached_load() {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<LoadResult>> loaded;
  std::string path = env_or("FLEXATTN_LIBCUDA", kDefaultLibcuda);
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = loaded[path];
  if (!slot) slot = load(path);
  return *slot;
}

}  // namespace

const DriverApi* try_driver(std::string* error) {
  const LoadResult& r = cached_load();
  if (!r.error.empty()) {
    if (error) *error = r.error;
    return nullptr;
  }
  return &r.api;
}

const DriverApi& driver() {
  std::string error;
  const DriverApi* api = try_driver(&error);
  if (!api) throw Error(error);
  return *api;
}

std::string cu_error_text(CUresult r) {
  std::string error;
  const DriverApi* api = try_driver(&error);
  const char* name = nullptr;
  const char* text = nullptr;
  if (api) api->cuGetErrorName(r, &name), api->cuGetErrorString(r, &text);
  std::string out = name ? name : "CUresult " + std::to_string(r);
  if (text) out += std::string(" (") + text + ")";
  return out;
}

void cu_check(CUresult r, const std::string& what) {
  if (r != CUDA_SUCCESS) throw Error(what + " failed: " + cu_error_text(r));
}

}  // namespace flexattn::jit
