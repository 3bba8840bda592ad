// Loading libnccl at run time (docs/cp.md §3 "Loading libnccl").
#include "cp/nccl_api.h"

#include <map>
#include <memory>
#include <mutex>

#include "flexattn/error.h"
#include "jit/sys.h"

namespace flexattn::cp {
namespace {

constexpr const char* kDefaultLibnccl = "libnccl.so.2";

struct LoadResult {
  NcclApi api{};
  std::string error;  // empty when usable
};

std::unique_ptr<LoadResult> load(const std::string& path) {
  auto r = std::make_unique<LoadResult>();
  const std::string from_env = path == kDefaultLibnccl ? "" : " (path from FLEXATTN_LIBNCCL)";
  std::string err;
  void* lib = jit::open_library(path, &err);
  if (!lib) {
    r->error = "NCCL not found (" + path + "): " + err +
               "; context parallelism over NCCL needs libnccl (install NCCL 2.x or set FLEXATTN_LIBNCCL)" + from_env;
    return r;
  }
  NcclApi& a = r->api;
  a.path = jit::library_path_of(jit::find_symbol(lib, "ncclGetVersion"));
  if (a.path.empty()) a.path = path;
  std::string missing;
  jit::bind_symbol(lib, "ncclGetVersion", a.ncclGetVersion, true, missing);
  jit::bind_symbol(lib, "ncclGetUniqueId", a.ncclGetUniqueId, true, missing);
  jit::bind_symbol(lib, "ncclCommInitRank", a.ncclCommInitRank, true, missing);
  jit::bind_symbol(lib, "ncclCommDestroy", a.ncclCommDestroy, true, missing);
  jit::bind_symbol(lib, "ncclCommAbort", a.ncclCommAbort, true, missing);
  jit::bind_symbol(lib, "ncclCommGetAsyncError", a.ncclCommGetAsyncError, true, missing);
  jit::bind_symbol(lib, "ncclGetErrorString", a.ncclGetErrorString, true, missing);
  jit::bind_symbol(lib, "ncclGroupStart", a.ncclGroupStart, true, missing);
  jit::bind_symbol(lib, "ncclGroupEnd", a.ncclGroupEnd, true, missing);
  jit::bind_symbol(lib, "ncclSend", a.ncclSend, true, missing);
  jit::bind_symbol(lib, "ncclRecv", a.ncclRecv, true, missing);
  // ncclSend/ncclRecv appeared in NCCL 2.7; a library without them is too old, not broken.
  if (!missing.empty())
    r->error = "NCCL library " + path + " lacks entry points flexattn needs (" + missing +
               "); context parallelism needs NCCL 2.7 or newer" + from_env;
  return r;
}

// Keyed by path, like jit::driver(): a process (a test) may point FLEXATTN_LIBNCCL elsewhere later.
const LoadResult& cached_load() {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<LoadResult>> loaded;
  const std::string path = jit::env_or("FLEXATTN_LIBNCCL", kDefaultLibnccl);
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = loaded[path];
  if (!slot) slot = load(path);
  return *slot;
}

const char* result_name(ncclResult_t r) {
  static const char* names[] = {"ncclSuccess",         "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
                                "ncclInvalidArgument", "ncclInvalidUsage",       "ncclRemoteError", "ncclInProgress"};
  return r >= 0 && r < int(sizeof(names) / sizeof(names[0])) ? names[r] : nullptr;
}

}  // namespace

const NcclApi* try_nccl_api(std::string* error) {
  const LoadResult& r = cached_load();
  if (!r.error.empty()) {
    if (error) *error = r.error;
    return nullptr;
  }
  return &r.api;
}

const NcclApi& nccl_api() {
  std::string error;
  const NcclApi* api = try_nccl_api(&error);
  if (!api) throw Error(error);
  return *api;
}

std::string nccl_error_text(ncclResult_t r) {
  const char* name = result_name(r);
  std::string out = name ? name : "ncclResult_t " + std::to_string(r);
  const NcclApi* api = try_nccl_api(nullptr);
  const char* text = api ? api->ncclGetErrorString(r) : nullptr;
  if (text && *text) out += std::string(" (") + text + ")";
  return out;
}

void nccl_check(ncclResult_t r, const std::string& what) {
  if (r != ncclSuccess) throw Error(what + " failed: " + nccl_error_text(r));
}

}  // namespace flexattn::cp
