#include "jit/nvrtc.h"

#include <algorithm>
#include <filesystem>
#include <mutex>

#include "flexattn/error.h"
#include "jit/header_bundle.h"
#include "jit/sys.h"
#include "jit/text_match.h"

namespace flexattn::jit {
namespace fs = std::filesystem;

namespace {


// Opens one candidate; on failure appends "  <where>: <why>" to `tried`.
std::unique_ptr<NvrtcApi> try_open(const std::string& file, std::string& tried) {
  std::string err;
  void* lib = open_library(file, &err);
  if (!lib) {
    tried += "  " + file + ": " + err + "\n";
    return nullptr;
  }
  auto api = std::make_unique<NvrtcApi>();
  std::string missing;
  bind_symbol(lib, "nvrtcVersion", api->nvrtcVersion, true, missing);
  bind_symbol(lib, "nvrtcGetErrorString", api->nvrtcGetErrorString, true, missing);
  bind_symbol(lib, "nvrtcCreateProgram", api->nvrtcCreateProgram, true, missing);
  bind_symbol(lib, "nvrtcDestroyProgram", api->nvrtcDestroyProgram, true, missing);
  bind_symbol(lib, "nvrtcCompileProgram", api->nvrtcCompileProgram, true, missing);
  bind_symbol(lib, "nvrtcGetProgramLogSize", api->nvrtcGetProgramLogSize, true, missing);
  bind_symbol(lib, "nvrtcGetProgramLog", api->nvrtcGetProgramLog, true, missing);
  bind_symbol(lib, "nvrtcGetCUBINSize", api->nvrtcGetCUBINSize, true, missing);
  bind_symbol(lib, "nvrtcGetCUBIN", api->nvrtcGetCUBIN, true, missing);
  bind_symbol(lib, "nvrtcGetNumSupportedArchs", api->nvrtcGetNumSupportedArchs, false, missing);
  bind_symbol(lib, "nvrtcGetSupportedArchs", api->nvrtcGetSupportedArchs, false, missing);
  if (!missing.empty()) {
    tried += "  " + file + ": lacks " + missing + " (NVRTC 11.1 or newer is needed)\n";
    return nullptr;
  }
  api->path = library_path_of(reinterpret_cast<void*>(api->nvrtcVersion));
  if (api->path.empty()) api->path = file;
  api->nvrtcVersion(&api->major, &api->minor);
  int n = 0;
  if (api->nvrtcGetNumSupportedArchs && api->nvrtcGetSupportedArchs && api->nvrtcGetNumSupportedArchs(&n) == 0 &&
      n > 0 && n < 1000) {
    api->supported_archs.resize(size_t(n));
    if (api->nvrtcGetSupportedArchs(api->supported_archs.data()) != 0) api->supported_archs.clear();
  }
  return api;
}

// libnvrtc.so.13 before .so.12 before the unversioned development link.
std::vector<std::string> libraries_in(const std::string& dir) {
  // libnvrtc.so(.<digits>)*
  auto is_nvrtc = [](const std::string& f) {
    const std::string stem = "libnvrtc.so";
    if (f.rfind(stem, 0) != 0) return false;
    std::string_view rest = std::string_view(f).substr(stem.size());
    while (!rest.empty()) {
      if (rest[0] != '.' || rest.size() < 2 || !text::is_digit(rest[1])) return false;
      rest.remove_prefix(1);
      while (!rest.empty() && text::is_digit(rest[0])) rest.remove_prefix(1);
    }
    return true;
  };
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string f = e.path().filename().string();
    if (is_nvrtc(f)) found.push_back(f);
  }
  std::sort(found.begin(), found.end(), [](const std::string& a, const std::string& b) {
    auto major = [](const std::string& f) { return f.size() > 12 ? std::atoi(f.c_str() + 12) : -1; };
    return major(a) != major(b) ? major(a) > major(b) : a > b;
  });
  for (auto& f : found) f = dir + "/" + f;
  return found;
}

}  // namespace

std::unique_ptr<NvrtcApi> load_nvrtc(const NvrtcSearch& s, std::string* error) {
  std::string tried;
  if (!s.override_path.empty()) {
    if (auto api = try_open(s.override_path, tried)) return api;
    if (error)
      *error = "NVRTC not found. Tried:\n" + tried +
               "FLEXATTN_NVRTC is the only place tried when it is set: point it to a libnvrtc.so* file, or "
               "unset it to search CUDA_HOME, /usr/local/cuda and Python site-packages";
    return nullptr;
  }
  for (const auto& dir : nvrtc_search_dirs(s)) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      tried += "  " + dir + ": no such folder\n";
      continue;
    }
    auto files = libraries_in(dir);
    if (files.empty()) tried += "  " + dir + ": no libnvrtc.so*\n";
    for (const auto& f : files)
      if (auto api = try_open(f, tried)) return api;
  }
  if (s.loader_fallback)
    for (const char* soname : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"})
      if (auto api = try_open(soname, tried)) return api;
  if (error)
    *error = "NVRTC not found. Tried:\n" + (tried.empty() ? std::string("  (no candidate folder exists)\n") : tried) +
             "Install the CUDA toolkit (or `pip install nvidia-cuda-nvrtc`), set CUDA_HOME, or set "
             "FLEXATTN_NVRTC to the full path of libnvrtc.so*";
  return nullptr;
}

const NvrtcApi* try_nvrtc(std::string* error) {
  struct Loaded {
    std::unique_ptr<NvrtcApi> api;
    std::string error;
  };
  static std::mutex mu;
  static std::map<std::string, Loaded> cache;
  NvrtcSearch s = NvrtcSearch::from_environment();
  std::string id = s.override_path + '\n' + s.cuda_home + '\n' + s.virtual_env + '\n' + s.conda_prefix + '\n' +
                   s.pythonpath + '\n' + s.home;
  for (const std::string& d : s.python_sites) id += '\n' + d;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(id);
  if (it == cache.end()) {
    Loaded l;
    l.api = load_nvrtc(s, &l.error);
    it = cache.emplace(id, std::move(l)).first;
  }
  if (!it->second.api && error) *error = it->second.error;
  return it->second.api.get();
}

const NvrtcApi& nvrtc() {
  std::string error;
  const NvrtcApi* api = try_nvrtc(&error);
  if (!api) throw Error(error);
  return *api;
}

CompileResult nvrtc_compile(const std::string& source, const std::string& name, const std::string& arch,
                            const std::vector<std::string>& options,
                            const std::map<std::string, std::string>& extra_headers) {
  const NvrtcApi& api = nvrtc();
  std::vector<const char*> contents, paths;
  for (const auto& h : header_bundle()) contents.push_back(h.data), paths.push_back(h.path);
  for (const auto& [path, text] : extra_headers) contents.push_back(text.c_str()), paths.push_back(path.c_str());

  nvrtcProgram prog = nullptr;
  nvrtcResult rc = api.nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), int(paths.size()),
                                          contents.data(), paths.data());
  if (rc != 0) throw Error("nvrtcCreateProgram failed for " + name + ": " + api.nvrtcGetErrorString(rc));
  struct Guard {
    const NvrtcApi& api;
    nvrtcProgram& p;
    ~Guard() { api.nvrtcDestroyProgram(&p); }
  } guard{api, prog};

  std::vector<std::string> opts = {"--gpu-architecture=" + arch, "--ptxas-options=-v"};
  // NVRTC 12.9+ reuses cubins from the driver's compute cache when a driver is installed, and then
  // prints no ptxas report (seen on an H200 machine with NVRTC 13.0). Our own cache sits in front of
  // NVRTC anyway, and the report is needed (spill checks, kernel-name checks), so bypass theirs.
  if (api.major > 12 || (api.major == 12 && api.minor >= 9)) opts.push_back("--no-cache");
  opts.insert(opts.end(), options.begin(), options.end());
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  rc = api.nvrtcCompileProgram(prog, int(argv.size()), argv.data());

  CompileResult out;
  size_t log_size = 0;
  if (api.nvrtcGetProgramLogSize(prog, &log_size) == 0 && log_size > 1) {
    out.log.resize(log_size);
    api.nvrtcGetProgramLog(prog, out.log.data());
    out.log.resize(log_size - 1);  // drop the terminating NUL
  }
  if (rc != 0)
    throw Error("NVRTC " + api.version() + " could not compile " + name + " for " + arch + " (" +
                api.nvrtcGetErrorString(rc) + "):\n" + out.log);
  size_t cubin_size = 0;
  rc = api.nvrtcGetCUBINSize(prog, &cubin_size);
  if (rc != 0 || cubin_size == 0)
    throw Error("NVRTC produced no cubin for " + name + " (arch must be a real sm_XY target, got '" + arch + "')");
  out.cubin.resize(cubin_size);
  rc = api.nvrtcGetCUBIN(prog, out.cubin.data());
  if (rc != 0) throw Error("nvrtcGetCUBIN failed for " + name + ": " + api.nvrtcGetErrorString(rc));
  out.ptxas = parse_ptxas_info(out.log);
  return out;
}

}  // namespace flexattn::jit
