#pragma once
// NVRTC, opened at run time. The search order (first usable library wins):
//   FLEXATTN_NVRTC (a full file path; when set it is the only place tried),
//   $CUDA_HOME/lib64, /usr/local/cuda/lib64, /usr/local/cuda/targets/x86_64-linux/lib,
//   the NVRTC of pip wheels (<site>/nvidia/cu13/lib, <site>/nvidia/cuda_nvrtc/lib) in the Python
//   folders of $VIRTUAL_ENV, $CONDA_PREFIX, $PYTHONPATH, ~/.local, /usr/lib/python3, /usr/local/lib,
//   /opt/*/.venv, and last the dynamic loader's own path (LD_LIBRARY_PATH, ld.so.cache).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "flexattn/jit.h"

namespace flexattn::jit {

using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;

struct NvrtcApi {
  std::string path;  // the file loaded
  int major = 0, minor = 0;
  std::vector<int> supported_archs;  // e.g. {75, 80, 86, 89, 90, 100, ...}; empty when unknown

  nvrtcResult (*nvrtcVersion)(int*, int*);
  const char* (*nvrtcGetErrorString)(nvrtcResult);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                                    const char* const*);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram*);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcGetNumSupportedArchs)(int*);  // optional
  nvrtcResult (*nvrtcGetSupportedArchs)(int*);     // optional

  std::string version() const { return std::to_string(major) + "." + std::to_string(minor); }
};

// Where to look. from_environment() reads the variables above; tests build their own.
struct NvrtcSearch {
  std::string override_path;  // FLEXATTN_NVRTC
  std::string cuda_home, virtual_env, conda_prefix, pythonpath, home;
  // The running Python's site-packages (set_python_sites, from the Python package): searched first among the Python
  // folders, so `venv/bin/python` finds torch's NVRTC wheel without an activated venv ($VIRTUAL_ENV unset).
  std::vector<std::string> python_sites;
  std::string root;            // prefix for the fixed system folders (/usr/local/cuda, /usr/lib, /opt)
  bool loader_fallback = true;  // finally try dlopen("libnvrtc.so.13") etc. through the dynamic loader
  static NvrtcSearch from_environment();
};

// The Python package calls it when it loads the extension (site.getsitepackages()); from_environment() reads it.
void set_python_sites(std::vector<std::string> dirs);

// Folders searched, in order, without duplicates (absent ones included: the error lists them).
std::vector<std::string> nvrtc_search_dirs(const NvrtcSearch& search);

// Loads the first usable NVRTC. On failure returns nullptr and sets *error to a message that lists
// every place tried and why each failed. Not cached: each call searches again.
std::unique_ptr<NvrtcApi> load_nvrtc(const NvrtcSearch& search, std::string* error);

// The process's NVRTC for the current environment (searched once per distinct environment).
const NvrtcApi* try_nvrtc(std::string* error);
const NvrtcApi& nvrtc();  // throws flexattn::Error with load_nvrtc's message

struct CompileResult {
  std::string cubin;
  std::string log;
  std::map<std::string, PtxasInfo> ptxas;  // entry functions only
};

// Compiles `source` for `arch` with the header bundle (plus `extra_headers`, path -> contents) available
// to #include. `name` labels the source in diagnostics. Throws flexattn::Error with the NVRTC log when
// compilation fails.
CompileResult nvrtc_compile(const std::string& source, const std::string& name, const std::string& arch,
                            const std::vector<std::string>& options,
                            const std::map<std::string, std::string>& extra_headers = {});

// Parses ptxas -v output into per-entry-function resources. Non-entry (device) functions are skipped:
// their stack is already part of the entry's cumulative stack.
std::map<std::string, PtxasInfo> parse_ptxas_info(const std::string& log);

}  // namespace flexattn::jit
