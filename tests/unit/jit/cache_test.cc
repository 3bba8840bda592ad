// The kernel cache: keys, miss -> hit, damaged entries, REQUIRE_CACHE, request validation, list/clear.
// Needs NVRTC, not a GPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "flexattn/error.h"
#include "jit/json.h"
#include "jit/sha256.h"
#include "jit/sys.h"
#include "jit_test_util.h"

namespace flexattn::jit {
namespace {
namespace fs = std::filesystem;
using testing::CacheTest;
using testing::ScopedEnv;
using testing::small_request;

std::string error_of(const KernelRequest& r) {
  try {
    get_or_compile(r);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

using Key = CacheTest;

TEST_F(Key, IsReadablePrefixPlusSixteenHexDigits) {
  std::string key = kernel_key(small_request());
  EXPECT_TRUE(std::regex_match(key, std::regex("test_scale_sm_80_[0-9a-f]{16}"))) << key;
  EXPECT_EQ(kernel_key(small_request()), key);
}

TEST_F(Key, ChangesWithSourceOptionsAndArch) {
  KernelRequest base = small_request();
  std::string key = kernel_key(base);
  EXPECT_NE(kernel_key(small_request("1")), key);
  KernelRequest opt = base;
  opt.options = {"-DX=1"};
  EXPECT_NE(kernel_key(opt), key);
  KernelRequest arch = base;
  arch.arch = "sm_86";
  arch.prefix = base.prefix;
  EXPECT_NE(kernel_key(arch), key);
  KernelRequest names = base;
  names.kernel_names = {};  // what the caller looks up does not change the cubin
  EXPECT_EQ(kernel_key(names), key);
}

using Cache = CacheTest;

TEST_F(Cache, MissCompilesThenMemoryAndDiskHitsDoNot) {
  KernelRequest r = small_request();
  JitStats s0 = jit_stats();
  CompiledKernel a = get_or_compile(r);
  EXPECT_EQ(a.origin, CompiledKernel::Origin::compiled);
  EXPECT_EQ(jit_stats().compiles, s0.compiles + 1);
  ASSERT_TRUE(a.cubin && !a.cubin->empty());
  EXPECT_EQ(a.ptxas.count("scale"), 1u);
  EXPECT_EQ(a.entry_dir, cache_dir() + "/" + a.key);
  for (const char* f : {"source.cu", "kernel.cubin", "meta.json"}) EXPECT_TRUE(fs::exists(a.entry_dir + "/" + f)) << f;

  CompiledKernel b = get_or_compile(r);
  EXPECT_EQ(b.origin, CompiledKernel::Origin::memory);
  EXPECT_EQ(*b.cubin, *a.cubin);

  clear_memory_cache();
  CompiledKernel c = get_or_compile(r);
  EXPECT_EQ(c.origin, CompiledKernel::Origin::disk);
  EXPECT_EQ(*c.cubin, *a.cubin);
  EXPECT_EQ(c.ptxas.at("scale").registers, a.ptxas.at("scale").registers);
  EXPECT_EQ(c.kernel_names, r.kernel_names);

  JitStats s1 = jit_stats();
  EXPECT_EQ(s1.compiles, s0.compiles + 1);
  EXPECT_EQ(s1.memory_hits, s0.memory_hits + 1);
  EXPECT_EQ(s1.disk_hits, s0.disk_hits + 1);
}

TEST_F(Cache, MetaJsonDescribesTheEntry) {
  KernelRequest r = small_request();
  r.options = {"-DUNUSED=1"};
  CompiledKernel k = get_or_compile(r);
  auto meta = parse_json(*read_file(k.entry_dir + "/meta.json"));
  ASSERT_TRUE(meta);
  EXPECT_EQ(*meta->get_string("key"), k.key);
  EXPECT_EQ(*meta->get_string("arch"), "sm_80");
  EXPECT_EQ(meta->get("options")->items.at(0).str, "-DUNUSED=1");
  EXPECT_EQ(*meta->get_string("cubin_sha256"), sha256_hex(*k.cubin));
  EXPECT_EQ(meta->get_number("cubin_bytes"), double(k.cubin->size()));
  EXPECT_EQ(meta->get_number("source_bytes"), double(r.source.size()));
  EXPECT_FALSE(meta->get_string("nvrtc_version")->empty());
  EXPECT_TRUE(meta->get("ptxas")->get("scale"));
  EXPECT_TRUE(std::regex_match(*meta->get_string("created"), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
  EXPECT_EQ(*read_file(k.entry_dir + "/source.cu"), r.source);
}

// Damages one file of a stored entry, then expects the next lookup to recompile and repair it.
void expect_recompiled_after(const KernelRequest& r, const std::function<void(const std::string&)>& damage) {
  CompiledKernel first = get_or_compile(r);
  damage(first.entry_dir);
  clear_memory_cache();
  JitStats s0 = jit_stats();
  CompiledKernel again = get_or_compile(r);
  EXPECT_EQ(again.origin, CompiledKernel::Origin::compiled);
  EXPECT_EQ(jit_stats().compiles, s0.compiles + 1);
  EXPECT_EQ(jit_stats().corrupt_entries, s0.corrupt_entries + 1);
  EXPECT_EQ(*again.cubin, *first.cubin);
  clear_memory_cache();
  EXPECT_EQ(get_or_compile(r).origin, CompiledKernel::Origin::disk);  // the entry was rewritten whole
}

TEST_F(Cache, CorruptCubinIsRecompiled) {
  expect_recompiled_after(small_request(), [](const std::string& dir) {
    std::string cubin = *read_file(dir + "/kernel.cubin");
    cubin[cubin.size() / 2] ^= 0x5a;  // same size, different bytes
    write_file(dir + "/kernel.cubin", cubin);
  });
}

TEST_F(Cache, TruncatedMetaIsRecompiled) {
  expect_recompiled_after(small_request(), [](const std::string& dir) {
    std::string meta = *read_file(dir + "/meta.json");
    write_file(dir + "/meta.json", meta.substr(0, meta.size() / 2));
  });
}

TEST_F(Cache, MissingCubinIsRecompiled) {
  expect_recompiled_after(small_request(), [](const std::string& dir) { fs::remove(dir + "/kernel.cubin"); });
}

TEST_F(Cache, EditedSourceIsRecompiled) {
  expect_recompiled_after(small_request(), [](const std::string& dir) { write_file(dir + "/source.cu", "// edited"); });
}

TEST_F(Cache, RequireCacheTurnsAMissIntoAnError) {
  KernelRequest r = small_request("42");
  std::string key = kernel_key(r);
  {
    ScopedEnv require("FLEXATTN_JIT_REQUIRE_CACHE", "1");
    JitStats s0 = jit_stats();
    EXPECT_EQ(error_of(r), "kernel " + key + " is not in the cache (" + cache_dir() +
                               ") and FLEXATTN_JIT_REQUIRE_CACHE=1 forbids compiling");
    EXPECT_EQ(jit_stats().compiles, s0.compiles);
  }
  get_or_compile(r);  // warm the cache without the guard
  clear_memory_cache();
  ScopedEnv require("FLEXATTN_JIT_REQUIRE_CACHE", "1");
  EXPECT_EQ(get_or_compile(r).origin, CompiledKernel::Origin::disk);
}

TEST_F(Cache, ThreadsAskingForOneKeyCompileItOnce) {
  KernelRequest r = small_request("7");
  JitStats s0 = jit_stats();
  std::vector<std::thread> threads;
  std::vector<std::string> cubins(4);
  for (int i = 0; i < 4; ++i) threads.emplace_back([&, i] { cubins[i] = *get_or_compile(r).cubin; });
  for (auto& t : threads) t.join();
  EXPECT_EQ(jit_stats().compiles, s0.compiles + 1);
  for (const auto& c : cubins) EXPECT_EQ(c, cubins[0]);
}

TEST_F(Cache, UnwritableFolderStillReturnsTheKernel) {
  std::string file = tmp_ / "a_file";
  write_file(file, "x");
  ScopedEnv dir("FLEXATTN_CACHE_DIR", file + "/cache");  // a folder below a regular file cannot exist
  CompiledKernel k = get_or_compile(small_request("3"));
  EXPECT_TRUE(k.cubin && !k.cubin->empty());
  EXPECT_EQ(k.entry_dir, "");
}

TEST_F(Cache, DebugVariablePrintsCompileEvents) {
  ScopedEnv debug("FLEXATTN_JIT_DEBUG", "1");
  ::testing::internal::CaptureStderr();
  CompiledKernel k = get_or_compile(small_request("5"));
  clear_memory_cache();
  get_or_compile(small_request("5"));
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("[flexattn jit] compiled " + k.key + " for sm_80 in "), std::string::npos) << err;
  EXPECT_NE(err.find("[flexattn jit] disk hit " + k.key), std::string::npos) << err;
}

TEST_F(Cache, CompileErrorCarriesTheLogAndKeepsTheSource) {
  KernelRequest r = small_request();
  r.source = "extern \"C\" __global__ void broken() { undefined_thing(); }\n";
  r.kernel_names = {"broken"};
  std::string key = kernel_key(r);
  std::string m = error_of(r);
  EXPECT_NE(m.find("could not compile test_scale_sm_80.cu for sm_80"), std::string::npos) << m;
  EXPECT_NE(m.find("undefined_thing"), std::string::npos) << m;
  std::string saved = cache_dir() + "/failed/" + key;
  EXPECT_NE(m.find("(source saved in " + saved + ")"), std::string::npos) << m;
  EXPECT_EQ(*read_file(saved + "/source.cu"), r.source);
  EXPECT_FALSE(fs::exists(cache_dir() + "/" + key));
}

TEST_F(Cache, ListAndClear) {
  CompiledKernel a = get_or_compile(small_request("1"));
  CompiledKernel b = get_or_compile(small_request("2"));
  fs::create_directories(cache_dir() + "/keep_me");  // not an entry: clear must not touch it
  std::string cubin = *read_file(b.entry_dir + "/kernel.cubin");
  write_file(b.entry_dir + "/kernel.cubin", cubin + "x");
  auto list = cache_list();
  ASSERT_EQ(list.size(), 2u);
  std::map<std::string, CacheEntry> by_key;
  for (auto& e : list) by_key[e.key] = e;
  EXPECT_TRUE(by_key.at(a.key).valid);
  EXPECT_FALSE(by_key.at(b.key).valid);
  EXPECT_EQ(by_key.at(a.key).arch, "sm_80");
  EXPECT_GT(by_key.at(a.key).bytes, int64_t(a.cubin->size()));
  EXPECT_EQ(cache_clear(), 2);
  EXPECT_TRUE(cache_list().empty());
  EXPECT_TRUE(fs::exists(cache_dir() + "/keep_me"));
}

// A cache folder pointed at the wrong place ($HOME): clear removes what the cache wrote (entries, its scratch
// folders, failed/<key>) and nothing else, whatever the names; it used to delete any `failed`, `.tmp-*` or
// `.trash-*` folder whole. Needs no compiler: the cache's folders are laid out by hand.
TEST_F(Cache, ClearLeavesFoldersTheCacheDidNotWrite) {
  const fs::path d = cache_dir();
  auto put = [&](const fs::path& rel, const std::string& text = "x") {
    fs::create_directories((d / rel).parent_path());
    std::ofstream(d / rel) << text;
  };
  const std::string key = "test_scale_sm_80_0123456789abcdef";
  // The cache's own.
  put(key + "/meta.json"), put(key + "/kernel.cubin"), put(key + "/source.cu");
  put(".tmp-" + key + "-123-0/source.cu");
  put(".trash-" + key + "-45-6/meta.json");
  put("failed/" + key + "/source.cu"), put("failed/" + key + "/log.txt");
  fs::create_directories(d / "failed_only" / "failed" / key);
  // A user's.
  put("failed/thesis.tex");
  put("failed/other_0123456789abcdef/draft.txt");
  put(".tmp-notes/todo.txt");
  put(".trash-" + key + "-1-2/photo.jpg");
  put("user_0123456789abcdef/meta.json"), put("user_0123456789abcdef/photo.jpg");
  put("nested_0123456789abcdef/sub/meta.json");
  put("projects/a.txt");
  fs::create_directory_symlink(d / "projects", d / "link_0123456789abcdef");

  EXPECT_EQ(cache_clear(), 1);
  for (const std::string& gone : {key, ".tmp-" + key + "-123-0", ".trash-" + key + "-45-6", "failed/" + key})
    EXPECT_FALSE(fs::exists(d / gone)) << gone;
  for (const char* kept : {"failed/thesis.tex", "failed/other_0123456789abcdef/draft.txt", ".tmp-notes/todo.txt",
                           ".trash-test_scale_sm_80_0123456789abcdef-1-2/photo.jpg", "user_0123456789abcdef/photo.jpg",
                           "user_0123456789abcdef/meta.json", "nested_0123456789abcdef/sub/meta.json",
                           "projects/a.txt", "link_0123456789abcdef/a.txt", "failed_only/failed"})
    EXPECT_TRUE(fs::exists(d / kept)) << kept;
  // Once only the cache's failed/<key> folders are in it, `failed` goes too.
  fs::remove(d / "failed/thesis.tex");
  fs::remove_all(d / "failed/other_0123456789abcdef");
  put("failed/" + key + "/log.txt");
  EXPECT_EQ(cache_clear(), 0);
  EXPECT_FALSE(fs::exists(d / "failed"));
  EXPECT_TRUE(fs::exists(d / "projects/a.txt"));
}

TEST(CacheDir, FollowsTheEnvironment) {
  ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
  ScopedEnv home("HOME", "/home/someone");
  {
    ScopedEnv dir("FLEXATTN_CACHE_DIR", "/explicit");
    EXPECT_EQ(cache_dir(), "/explicit");
  }
  ScopedEnv dir("FLEXATTN_CACHE_DIR", std::nullopt);
  EXPECT_EQ(cache_dir(), "/xdg/flexattn");
  ScopedEnv no_xdg("XDG_CACHE_HOME", std::nullopt);
  EXPECT_EQ(cache_dir(), "/home/someone/.cache/flexattn");
}

using Request = CacheTest;

TEST_F(Request, BadPrefix) {
  KernelRequest r = small_request();
  r.prefix = "../escape";
  EXPECT_EQ(error_of(r), "KernelRequest.prefix: expected 1-100 characters from [A-Za-z0-9_.-] not starting with "
                         "'.' or '-', got '../escape'");
  r.prefix = "";
  EXPECT_NE(error_of(r).find("KernelRequest.prefix: expected"), std::string::npos);
}

TEST_F(Request, BadArch) {
  KernelRequest r = small_request();
  r.arch = "compute_80";
  EXPECT_EQ(error_of(r),
            "KernelRequest.arch: expected a real target sm_<major><minor>[a] (e.g. sm_80, sm_90a), got 'compute_80'");
  r.arch = "sm_12";  // well formed, but no NVRTC targets it
  EXPECT_NE(error_of(r).find("KernelRequest.arch: NVRTC"), std::string::npos) << error_of(r);
  EXPECT_NE(error_of(r).find("cannot target sm_12; it supports"), std::string::npos) << error_of(r);
}

TEST_F(Request, ArchInOptions) {
  KernelRequest r = small_request();
  r.options = {"-arch=sm_90"};
  EXPECT_EQ(error_of(r), "KernelRequest.options: the target goes in KernelRequest.arch, not in options ('-arch=sm_90')");
}

TEST_F(Request, EmptySource) {
  KernelRequest r = small_request();
  r.source = "";
  EXPECT_EQ(error_of(r), "KernelRequest.source: expected CUDA source, got an empty string");
}

TEST_F(Request, KernelNameNotDefined) {
  KernelRequest r = small_request();
  r.kernel_names = {"scale", "missing_kernel"};
  std::string m = error_of(r);
  EXPECT_NE(m.find("KernelRequest.kernel_names: 'missing_kernel' is not an entry function of test_scale_sm_80_"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("the source defines: scale"), std::string::npos) << m;
  r.kernel_names = {"bad name"};
  EXPECT_EQ(error_of(r), "KernelRequest.kernel_names: expected C identifiers (extern \"C\" kernel names), got 'bad name'");
}

TEST_F(Request, KernelNameIsCheckedOnCacheHitsToo) {
  KernelRequest r = small_request("9");
  get_or_compile(r);
  r.kernel_names = {"other"};
  EXPECT_NE(error_of(r).find("'other' is not an entry function"), std::string::npos);  // memory hit
  clear_memory_cache();
  EXPECT_NE(error_of(r).find("'other' is not an entry function"), std::string::npos);  // disk hit
}

}  // namespace
}  // namespace flexattn::jit
