// NVRTC: found at run time, compiles against the header bundle for sm_80 and sm_90a, reports ptxas
// resources, and explains where it looked when it cannot be found. Needs NVRTC, not a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>

#include "flexattn/error.h"
#include "jit/header_bundle.h"
#include "jit/nvrtc.h"
#include "jit_test_util.h"

namespace flexattn::jit {
namespace {
namespace fs = std::filesystem;
using testing::ScopedEnv;
using testing::TempDir;

bool is_elf(const std::string& bytes) { return bytes.size() > 4 && bytes.compare(0, 4, "\x7f" "ELF") == 0; }

TEST(Nvrtc, IsFound) {
  std::string error;
  const NvrtcApi* api = try_nvrtc(&error);
  ASSERT_NE(api, nullptr) << error;
  EXPECT_GE(api->major, 11);
  EXPECT_FALSE(api->path.empty());
  EXPECT_NE(api->version().find('.'), std::string::npos);
}

const char* kUsesHeader = R"(
#include "test/twice.h"
struct P { float* out; int n; };
extern "C" __global__ void k(const P p) {
  int i = threadIdx.x;
  if (i < p.n) p.out[i] = twice(i);
}
)";

class NvrtcArch : public ::testing::TestWithParam<std::string> {};

TEST_P(NvrtcArch, CompilesAKernelThatIncludesAHeader) {
  std::map<std::string, std::string> headers = {
      {"test/twice.h", "#pragma once\n__device__ inline float twice(int i) { return 2.0f * i; }\n"}};
  CompileResult r = nvrtc_compile(kUsesHeader, "uses_header.cu", GetParam(), {"-std=c++17"}, headers);
  EXPECT_TRUE(is_elf(r.cubin));
  ASSERT_EQ(r.ptxas.count("k"), 1u) << r.log;
  EXPECT_GT(r.ptxas["k"].registers, 0);
  EXPECT_EQ(r.ptxas["k"].spill_stores, 0);
  EXPECT_NE(r.log.find("for '" + GetParam() + "'"), std::string::npos) << r.log;
}

INSTANTIATE_TEST_SUITE_P(Archs, NvrtcArch, ::testing::Values("sm_80", "sm_90a"));

TEST(Nvrtc, MissingHeaderIsACompileErrorNamingIt) {
  try {
    nvrtc_compile(kUsesHeader, "uses_header.cu", "sm_80", {});
    FAIL() << "expected a compile error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("could not compile uses_header.cu for sm_80"), std::string::npos) << m;
    EXPECT_NE(m.find("test/twice.h"), std::string::npos) << m;
  }
}

TEST(Nvrtc, HeadersIncludeEachOtherByTheirFullPathOnly) {
  // The contract for kernels/: includes name the path under kernels/, also inside headers.
  const char* src = "#include \"a/x.h\"\nextern \"C\" __global__ void k(int* p) { *p = X + Y; }\n";
  std::map<std::string, std::string> full = {{"a/x.h", "#include \"a/y.h\"\n#define X 1\n"}, {"a/y.h", "#define Y 2\n"}};
  EXPECT_NO_THROW(nvrtc_compile(src, "nested.cu", "sm_80", {}, full));
  std::map<std::string, std::string> relative = {{"a/x.h", "#include \"y.h\"\n#define X 1\n"}, {"a/y.h", "#define Y 2\n"}};
  EXPECT_THROW(nvrtc_compile(src, "nested.cu", "sm_80", {}, relative), Error);
}

TEST(Nvrtc, BundledParamsHeaderCompiles) {
  // The real bundle, as kernels will use it. kernels/ is written elsewhere; skip until it has params.h.
  if (!find_header("common/params.h")) GTEST_SKIP() << "kernels/common/params.h is not bundled yet";
  std::string src = "#include \"common/params.h\"\nextern \"C\" __global__ void touch(int* p) { *p = 1; }\n";
  CompileResult r = nvrtc_compile(src, "bundle_probe.cu", "sm_80", {"-std=c++17"});
  EXPECT_TRUE(is_elf(r.cubin));
  EXPECT_EQ(r.ptxas.count("touch"), 1u);
}

TEST(Nvrtc, ReportsStackOfALocalArray) {
  const char* src = R"(
extern "C" __global__ void local_array(float* a, int i) {
  float loc[512];
  for (int j = 0; j < 512; ++j) loc[j] = a[j] * j;
  a[0] = loc[i & 511];
})";
  CompileResult r = nvrtc_compile(src, "local_array.cu", "sm_80", {});
  ASSERT_EQ(r.ptxas.count("local_array"), 1u) << r.log;
  EXPECT_GE(r.ptxas["local_array"].stack, 2048) << r.log;
}

TEST(Nvrtc, ReportsSpillsUnderARegisterCap) {
  // 64 values live across a loop with a 32-register cap must spill.
  const char* src = R"(
extern "C" __global__ void pressure(float* a, int n) {
  float v[64];
#pragma unroll
  for (int j = 0; j < 64; ++j) v[j] = a[j * 97 + threadIdx.x];
  for (int t = 0; t < n; ++t) {
#pragma unroll
    for (int j = 0; j < 64; ++j) v[j] = v[j] * v[(j + 1) & 63] + 1.0f;
  }
#pragma unroll
  for (int j = 0; j < 64; ++j) a[j * 97 + threadIdx.x] = v[j];
})";
  CompileResult r = nvrtc_compile(src, "pressure.cu", "sm_80", {"--maxrregcount=32"});
  ASSERT_EQ(r.ptxas.count("pressure"), 1u) << r.log;
  EXPECT_LE(r.ptxas["pressure"].registers, 32);
  EXPECT_GT(r.ptxas["pressure"].spill_stores, 0) << r.log;
  EXPECT_GT(r.ptxas["pressure"].spill_loads, 0) << r.log;
}

TEST(NvrtcSearch, OverrideToAMissingFileFailsAndSaysSo) {
  ScopedEnv env("FLEXATTN_NVRTC", "/nonexistent/libnvrtc.so.13");
  std::string error;
  EXPECT_EQ(try_nvrtc(&error), nullptr);
  EXPECT_NE(error.find("NVRTC not found. Tried:\n  /nonexistent/libnvrtc.so.13: "), std::string::npos) << error;
  EXPECT_NE(error.find("FLEXATTN_NVRTC is the only place tried"), std::string::npos) << error;
  try {
    nvrtc();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), error);
  }
}

TEST(NvrtcSearch, OrderStartsWithCudaHomeThenTheToolkitFolders) {
  NvrtcSearch s;
  s.cuda_home = "/opt/cuda-x";
  s.root = "/r";
  auto dirs = nvrtc_search_dirs(s);
  ASSERT_GE(dirs.size(), 3u);
  EXPECT_EQ(dirs[0], "/opt/cuda-x/lib64");
  EXPECT_EQ(dirs[1], "/r/usr/local/cuda/lib64");
  EXPECT_EQ(dirs[2], "/r/usr/local/cuda/targets/x86_64-linux/lib");
}

// A torch NVRTC wheel under tmp/ENV/lib/python3.12/site-packages (a link to the real library), a search with no
// toolkit and no loader fallback; `where` points the search at the env. The wheel is then the only place to find it.
void expect_found_in_a_wheel(const std::string& env, const std::function<void(NvrtcSearch&, const std::string&)>& where) {
  std::string error;
  const NvrtcApi* real = try_nvrtc(&error);
  ASSERT_NE(real, nullptr) << error;
  TempDir tmp;
  const std::string lib_dir = tmp / (env + "/lib/python3.12/site-packages/nvidia/cu13/lib");
  fs::create_directories(lib_dir);
  fs::create_symlink(fs::canonical(real->path), lib_dir + "/libnvrtc.so.13");
  fs::create_directories(tmp / "root");
  NvrtcSearch s;
  s.root = tmp / "root";  // no toolkit there
  s.loader_fallback = false;
  where(s, tmp / env);
  const std::vector<std::string> dirs = nvrtc_search_dirs(s);
  EXPECT_NE(std::find(dirs.begin(), dirs.end(), lib_dir), dirs.end());
  auto api = load_nvrtc(s, &error);
  ASSERT_NE(api, nullptr) << error;
  EXPECT_EQ(api->major, real->major);
}

TEST(NvrtcSearch, FindsTheNvrtcOfATorchWheelInAVirtualEnv) {
  expect_found_in_a_wheel("venv", [](NvrtcSearch& s, const std::string& env) { s.virtual_env = env; });
}

// `venv/bin/python` without an activated venv: $VIRTUAL_ENV is unset, and the wheel was found only through it.
TEST(NvrtcSearch, FindsTheNvrtcOfATorchWheelInThePythonSites) {
  expect_found_in_a_wheel("env", [](NvrtcSearch& s, const std::string& env) {
    s.python_sites = {env + "/lib/python3.12/site-packages"};
  });
  set_python_sites({"/py/site-a"});  // what the Python package registers reaches the process's search
  EXPECT_EQ(NvrtcSearch::from_environment().python_sites, std::vector<std::string>{"/py/site-a"});
  set_python_sites({});
}

TEST(NvrtcSearch, FailureListsEveryPlaceTried) {
  TempDir tmp;
  fs::create_directories(tmp / "cuda/lib64");  // exists, but holds no NVRTC
  std::string wheel = tmp / "site/nvidia/cuda_nvrtc/lib";
  fs::create_directories(wheel);
  std::ofstream(wheel + "/libnvrtc.so.12") << "not an ELF file";
  NvrtcSearch s;
  s.cuda_home = tmp / "cuda";
  s.pythonpath = tmp / "site";
  s.root = tmp / "root";
  s.loader_fallback = false;
  std::string error;
  EXPECT_EQ(load_nvrtc(s, &error), nullptr);
  EXPECT_EQ(error.rfind("NVRTC not found. Tried:\n", 0), 0u) << error;
  EXPECT_NE(error.find("  " + (tmp / "cuda/lib64") + ": no libnvrtc.so*\n"), std::string::npos) << error;
  EXPECT_NE(error.find("  " + (tmp / "root/usr/local/cuda/lib64") + ": no such folder\n"), std::string::npos) << error;
  EXPECT_NE(error.find("  " + wheel + "/libnvrtc.so.12: "), std::string::npos) << error;
  EXPECT_NE(error.find("  " + (tmp / "site/nvidia/cu13/lib") + ": no such folder\n"), std::string::npos) << error;
  EXPECT_NE(error.find("set FLEXATTN_NVRTC"), std::string::npos) << error;
}

TEST(HeaderBundle, HashMatchesTheContentsAndPathsAreRelative) {
  const auto& bundle = header_bundle();
  EXPECT_EQ(compute_bundle_hash(bundle), header_bundle_hash());
  EXPECT_EQ(header_bundle_hash().size(), 64u);
  for (size_t i = 0; i < bundle.size(); ++i) {
    std::string path = bundle[i].path;
    EXPECT_NE(path.front(), '/') << path;
    EXPECT_EQ(path.find("kernels/"), std::string::npos) << path;
    EXPECT_EQ(std::string(bundle[i].data).size(), bundle[i].size) << path;  // NUL-terminated, no inner NUL
    if (i) {
      EXPECT_LT(std::string(bundle[i - 1].path), path);
    }
    EXPECT_EQ(find_header(path), &bundle[i]);
  }
  EXPECT_EQ(find_header("no/such/header.h"), nullptr);
}

TEST(HeaderBundle, EmbedsTheFilesOfKernels) {
  // The bundle must mirror kernels/ on disk (the test runs from the build tree of this checkout).
  fs::path kernels = fs::path(FLEXATTN_KERNELS_DIR);
  size_t on_disk = 0;
  for (const auto& e : fs::recursive_directory_iterator(kernels)) {
    std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".h" && ext != ".cuh" && ext != ".inc")) continue;
    ++on_disk;
    std::string rel = fs::relative(e.path(), kernels).generic_string();
    const BundledHeader* h = find_header(rel);
    ASSERT_NE(h, nullptr) << rel << " is in kernels/ but not in the bundle (rebuild?)";
    std::ifstream f(e.path(), std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_EQ(std::string(h->data, h->size), text) << rel;
  }
  EXPECT_EQ(header_bundle().size(), on_disk);
}

}  // namespace
}  // namespace flexattn::jit
