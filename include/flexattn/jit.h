#pragma once
// The JIT toolchain, seen from outside: compile CUDA source with NVRTC through a persistent cache,
// and report what the machine offers (`flexattn info`, `flexattn cache list|clear`).
//
// libnvrtc and libcuda are opened with dlopen at run time, so nothing here needs the CUDA toolkit
// to build, and every CPU-only path works without them. Environment variables: docs/env_vars.md.
//
// Kernel sources compile under NVRTC, which has no system headers: a kernel may include only the
// headers bundled from kernels/, by their path under kernels/ (#include "common/params.h", inside
// headers too: NVRTC does not resolve "params.h" relative to the including header), never <...>
// standard or toolkit headers (<cuda_bf16.h> included).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace flexattn::jit {

// ptxas's resource report for one entry function (from --ptxas-options=-v).
struct PtxasInfo {
  int registers = 0;
  int64_t spill_stores = 0;  // bytes
  int64_t spill_loads = 0;   // bytes
  int64_t smem = 0;          // static shared memory, bytes
  int64_t stack = 0;         // stack frame, bytes
};

struct KernelRequest {
  std::string prefix;                      // readable key part, e.g. "attn_fwd_sm80_bf16_d128"; [A-Za-z0-9_.-]
  std::string source;                      // complete CUDA source
  std::string arch;                        // "sm_80", "sm_86", "sm_89", "sm_90a", ...
  std::vector<std::string> options;        // extra NVRTC options; the arch goes in `arch`
  std::vector<std::string> kernel_names;   // extern "C" __global__ functions the caller will look up
};

struct CompiledKernel {
  enum class Origin { compiled, disk, memory };
  std::string key;  // <prefix>_<16 hex>; also the cache entry's folder name
  std::string arch;
  std::vector<std::string> kernel_names;
  std::shared_ptr<const std::string> cubin;  // never null in a returned value
  std::map<std::string, PtxasInfo> ptxas;    // per entry function
  std::string log;                           // NVRTC log of the compile that produced the cubin
  std::string entry_dir;                     // cache entry folder; "" when the disk cache was not writable
  Origin origin = Origin::compiled;
};

// The cache key of a request: prefix + '_' + 16 hex digits of SHA-256 over source, header-bundle hash,
// options, NVRTC version, arch and library version. Loads NVRTC (its version is part of the key).
std::string kernel_key(const KernelRequest& request);

// In-process cache, then the disk cache, then NVRTC. Throws flexattn::Error for an invalid request,
// a compile error (with the NVRTC log), a requested kernel name the source does not define, or a miss
// while FLEXATTN_JIT_REQUIRE_CACHE=1. Safe to call from several threads and several processes.
CompiledKernel get_or_compile(const KernelRequest& request);

// Counters since process start (tests use differences).
struct JitStats {
  int64_t compiles = 0;         // NVRTC invocations
  int64_t disk_hits = 0;
  int64_t memory_hits = 0;
  int64_t corrupt_entries = 0;  // disk entries found damaged and removed
  int64_t lost_races = 0;       // our compile finished after another process stored the same key
};
JitStats jit_stats();
void clear_memory_cache();

// FLEXATTN_CACHE_DIR, else $XDG_CACHE_HOME/flexattn, else $HOME/.cache/flexattn.
std::string cache_dir();

struct CacheEntry {
  std::string key, arch, nvrtc_version, created;
  int64_t bytes = 0;  // on disk, all files of the entry
  bool valid = false; // meta.json parses and matches the cubin
};
std::vector<CacheEntry> cache_list();
// Removes every entry, leftover temporary folders and failed/<key>/ (only folders laid out as the cache writes
// them: other files in the cache folder are left alone); returns the number of entries removed.
int cache_clear();

struct DeviceSummary {
  int index = 0;
  std::string name, arch;
  int sm_count = 0;
  int64_t smem_per_block_optin = 0, total_mem = 0;
};

struct JitInfo {
  std::string library_version;
  bool driver_found = false;
  std::string driver_path, driver_error;
  int driver_version = 0;  // e.g. 13000
  std::vector<DeviceSummary> devices;
  bool nvrtc_found = false;
  std::string nvrtc_path, nvrtc_version, nvrtc_error;
  std::string cache_dir;
  int cache_entries = 0;
  int64_t cache_bytes = 0;
  int header_count = 0;
  std::string header_bundle_hash;
};
// Never throws: what is missing is reported in the *_error fields.
JitInfo jit_info();
std::string format_jit_info(const JitInfo& info);

}  // namespace flexattn::jit
