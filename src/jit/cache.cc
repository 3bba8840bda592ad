// get_or_compile: in-process cache -> disk cache -> NVRTC.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <mutex>
#include <unordered_map>

#include "flexattn/error.h"
#include "jit/cache_store.h"
#include "jit/header_bundle.h"
#include "jit/nvrtc.h"
#include "jit/sha256.h"
#include "jit/sys.h"
#include "jit/text_match.h"

#ifndef FLEXATTN_VERSION
#define FLEXATTN_VERSION "unknown"
#endif

namespace flexattn::jit {
namespace {

struct Counters {
  std::atomic<int64_t> compiles{0}, disk_hits{0}, memory_hits{0}, corrupt_entries{0}, lost_races{0};
};
Counters& counters() {
  static Counters c;
  return c;
}

using Shared = std::shared_ptr<const CompiledKernel>;
struct MemoryCache {
  std::mutex mu;
  // A future per key: a second thread asking for a key being compiled waits for that compile.
  std::unordered_map<std::string, std::shared_future<Shared>> entries;
};
MemoryCache& memory() {
  static MemoryCache m;
  return m;
}

void debug(const std::string& message) {
  if (env_flag("FLEXATTN_JIT_DEBUG")) std::fprintf(stderr, "[flexattn jit] %s\n", message.c_str());
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

void validate(const KernelRequest& r, const NvrtcApi& api) {
  const std::string& p = r.prefix;
  check(!p.empty() && p.size() <= 100 && p[0] != '.' && p[0] != '-' && text::all_of(p, text::is_name_char),
        "KernelRequest.prefix: expected 1-100 characters from [A-Za-z0-9_.-] not starting with '.' or '-', got '" +
            r.prefix + "'");
  // sm_<2 or 3 digits>[a|f]
  std::string_view digits = std::string_view(r.arch);
  bool arch_ok = digits.rfind("sm_", 0) == 0;
  if (arch_ok) digits.remove_prefix(3);
  if (arch_ok && !digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) digits.remove_suffix(1);
  arch_ok = arch_ok && (digits.size() == 2 || digits.size() == 3) && text::all_of(digits, text::is_digit);
  check(arch_ok,
        "KernelRequest.arch: expected a real target sm_<major><minor>[a] (e.g. sm_80, sm_90a), got '" + r.arch + "'");
  int arch_num = std::stoi(std::string(digits));
  if (!api.supported_archs.empty()) {
    bool ok = std::find(api.supported_archs.begin(), api.supported_archs.end(), arch_num) != api.supported_archs.end();
    std::vector<std::string> names;
    for (int a : api.supported_archs) names.push_back("sm_" + std::to_string(a));
    check(ok, "KernelRequest.arch: NVRTC " + api.version() + " (" + api.path + ") cannot target " + r.arch +
                  "; it supports " + join(names, ", "));
  }
  check(!r.source.empty(), "KernelRequest.source: expected CUDA source, got an empty string");
  for (const auto& o : r.options)
    check(o.rfind("-arch", 0) != 0 && o.rfind("--gpu-architecture", 0) != 0 && o.rfind("-gpu-architecture", 0) != 0,
          "KernelRequest.options: the target goes in KernelRequest.arch, not in options ('" + o + "')");
  for (const auto& n : r.kernel_names)
    check(text::is_identifier(n),
          "KernelRequest.kernel_names: expected C identifiers (extern \"C\" kernel names), got '" + n + "'");
}

// The requested names must be entry functions of the cubin: a missing extern "C" or a typo otherwise
// surfaces much later as a cuModuleGetFunction failure on a GPU machine.
void check_names(const KernelRequest& r, const CompiledKernel& k) {
  if (k.ptxas.empty()) return;  // no ptxas report to check against
  std::vector<std::string> defined;
  for (const auto& [name, info] : k.ptxas) defined.push_back(name);
  for (const auto& n : r.kernel_names)
    check(k.ptxas.count(n) > 0, "KernelRequest.kernel_names: '" + n + "' is not an entry function of " + k.key +
                                    " (is it extern \"C\" __global__?); the source defines: " + join(defined, ", "));
}

Shared compile_or_load(const KernelRequest& r, const std::string& key, const NvrtcApi& api) {
  std::string dir = cache_dir();
  auto k = std::make_shared<CompiledKernel>();
  std::string problem;
  switch (disk::read_entry(dir, key, r.source, k.get(), &problem)) {
    case disk::ReadStatus::found:
      counters().disk_hits++;
      debug("disk hit " + key);
      k->kernel_names = r.kernel_names;
      return k;
    case disk::ReadStatus::corrupt:
      counters().corrupt_entries++;
      debug("corrupt entry " + key + " (" + problem + "): removed, recompiling");
      disk::discard_entry(dir + "/" + key);
      break;
    case disk::ReadStatus::missing:
      break;
  }
  if (env_flag("FLEXATTN_JIT_REQUIRE_CACHE"))
    throw Error("kernel " + key + " is not in the cache (" + dir + ") and FLEXATTN_JIT_REQUIRE_CACHE=1 forbids compiling");

  counters().compiles++;
  double t0 = now_ms();
  CompileResult c;
  try {
    c = nvrtc_compile(r.source, r.prefix + ".cu", r.arch, r.options);
  } catch (const Error& e) {
    std::string saved = disk::save_failed(dir, key, r.source, e.what());
    throw Error(std::string(e.what()) + (saved.empty() ? "" : "\n(source saved in " + saved + ")"));
  }
  double ms = now_ms() - t0;
  k->key = key;
  k->arch = r.arch;
  k->kernel_names = r.kernel_names;
  k->cubin = std::make_shared<const std::string>(std::move(c.cubin));
  k->ptxas = std::move(c.ptxas);
  k->log = std::move(c.log);
  k->origin = CompiledKernel::Origin::compiled;
  debug("compiled " + key + " for " + r.arch + " in " + std::to_string(int(ms)) + " ms");
  check_names(r, *k);

  disk::WriteInfo info{r.options, api.version(), FLEXATTN_VERSION, header_bundle_hash(), ms};
  bool lost = false;
  k->entry_dir = disk::write_entry(dir, *k, r.source, info, &lost);
  if (lost) counters().lost_races++, debug("another process stored " + key + " first; keeping its entry");
  if (k->entry_dir.empty()) debug("cache folder " + dir + " is not writable; " + key + " kept in memory only");
  return k;
}

}  // namespace

std::string kernel_key(const KernelRequest& r) {
  const NvrtcApi& api = nvrtc();
  validate(r, api);
  Sha256 h;
  h.field("flexattn-jit-key-v1").field(r.source).field(header_bundle_hash());
  h.field(std::to_string(r.options.size()));
  for (const auto& o : r.options) h.field(o);
  h.field(api.version()).field(r.arch).field(FLEXATTN_VERSION);
  return r.prefix + "_" + h.hex().substr(0, 16);
}

CompiledKernel get_or_compile(const KernelRequest& r) {
  std::string key = kernel_key(r);
  MemoryCache& mem = memory();
  std::promise<Shared> promise;
  std::shared_future<Shared> future;
  bool owner = false;
  {
    std::lock_guard<std::mutex> lock(mem.mu);
    auto it = mem.entries.find(key);
    if (it != mem.entries.end()) {
      future = it->second;
    } else {
      future = promise.get_future().share();
      mem.entries.emplace(key, future);
      owner = true;
    }
  }
  if (!owner) {
    CompiledKernel k = *future.get();  // rethrows the owner's error
    counters().memory_hits++;
    k.origin = CompiledKernel::Origin::memory;
    k.kernel_names = r.kernel_names;
    check_names(r, k);
    return k;
  }
  try {
    Shared k = compile_or_load(r, key, nvrtc());
    check_names(r, *k);
    promise.set_value(k);
    return *k;
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mem.mu);
      auto it = mem.entries.find(key);
      // clear_memory_cache() may have dropped (or replaced) our slot meanwhile.
      if (it != mem.entries.end() && it->second.valid() &&
          it->second.wait_for(std::chrono::seconds(0)) == std::future_status::timeout)
        mem.entries.erase(it);
    }
    promise.set_exception(std::current_exception());
    throw;
  }
}

JitStats jit_stats() {
  Counters& c = counters();
  return {c.compiles.load(), c.disk_hits.load(), c.memory_hits.load(), c.corrupt_entries.load(), c.lost_races.load()};
}

void clear_memory_cache() {
  std::lock_guard<std::mutex> lock(memory().mu);
  memory().entries.clear();
}

std::string cache_dir() {
  std::string d = env_or("FLEXATTN_CACHE_DIR");
  if (!d.empty()) return d;
  std::string xdg = env_or("XDG_CACHE_HOME");
  if (!xdg.empty()) return xdg + "/flexattn";
  std::string home = env_or("HOME");
  if (!home.empty()) return home + "/.cache/flexattn";
  return "/tmp/flexattn-cache-" + std::to_string(::getuid());
}

std::vector<CacheEntry> cache_list() { return disk::list_entries(cache_dir()); }
int cache_clear() { return disk::clear_entries(cache_dir()); }

}  // namespace flexattn::jit
