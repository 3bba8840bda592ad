// The driver loader without a GPU (errors), and on a GPU (skipped without one): device query, module
// load, launch with a by-value parameter struct, large dynamic shared memory, events.
#include <gtest/gtest.h>

#include <cmath>

#include "flexattn/error.h"
#include "jit/device.h"
#include "jit/module.h"
#include "jit_test_util.h"

namespace flexattn::jit {
namespace {
using testing::CacheTest;
using testing::ScopedEnv;
using testing::small_request;

TEST(Driver, MissingLibraryGivesOneClearError) {
  ScopedEnv env("FLEXATTN_LIBCUDA", "/nonexistent/libcuda.so.1");
  std::string error;
  EXPECT_EQ(try_driver(&error), nullptr);
  EXPECT_EQ(error.rfind("CUDA driver not found (/nonexistent/libcuda.so.1): ", 0), 0u) << error;
  EXPECT_NE(error.find("; the cuda backend needs an NVIDIA driver (path from FLEXATTN_LIBCUDA)"), std::string::npos)
      << error;
  try {
    device_count();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), error);
  }
  JitInfo info = jit_info();
  EXPECT_FALSE(info.driver_found);
  EXPECT_NE(format_jit_info(info).find("CUDA driver: not available (CUDA driver not found"), std::string::npos);
}

TEST(Driver, LibraryWithoutTheEntryPointsIsRejected) {
  ScopedEnv env("FLEXATTN_LIBCUDA", "libm.so.6");
  std::string error;
  EXPECT_EQ(try_driver(&error), nullptr);
  EXPECT_NE(error.find("lacks entry points flexattn needs (cuInit, cuDriverGetVersion,"), std::string::npos) << error;
}

TEST(Info, ReportsNvrtcAndTheCache) {
  testing::TempDir tmp;
  ScopedEnv dir("FLEXATTN_CACHE_DIR", tmp.path());
  JitInfo info = jit_info();
  EXPECT_TRUE(info.nvrtc_found) << info.nvrtc_error;
  EXPECT_EQ(info.cache_dir, tmp.path());
  EXPECT_EQ(info.cache_entries, 0);
  std::string text = format_jit_info(info);
  EXPECT_NE(text.find("NVRTC: " + info.nvrtc_version + " (" + info.nvrtc_path + ")"), std::string::npos) << text;
  EXPECT_NE(text.find("kernel cache: " + tmp.path() + " (0 entries"), std::string::npos) << text;
  EXPECT_NE(text.find("embedded kernel headers: "), std::string::npos) << text;
}

// ---- GPU ----

class Gpu : public CacheTest {
 protected:
  void SetUp() override {
    CacheTest::SetUp();
    std::string error;
    if (!try_driver(&error)) GTEST_SKIP() << error;
    if (device_count() == 0) GTEST_SKIP() << "no CUDA device";
    use_device(0);
    props_ = device_props(0);
  }
  DeviceProps props_;
};

struct ScaleParams {
  float* out;
  float a;
  int n;
};

TEST_F(Gpu, DevicePropertiesAreSane) {
  EXPECT_FALSE(props_.name.empty());
  EXPECT_GE(props_.major, 7);
  EXPECT_EQ(props_.arch, arch_for(props_.major, props_.minor));
  EXPECT_GT(props_.sm_count, 0);
  EXPECT_GE(props_.smem_per_block_optin, 48 * 1024);
  JitInfo info = jit_info();
  ASSERT_TRUE(info.driver_found);
  EXPECT_GE(info.driver_version, 11000);
  ASSERT_FALSE(info.devices.empty());
  EXPECT_EQ(info.devices[0].name, props_.name);
}

TEST_F(Gpu, LaunchesACompiledKernelWithAParamsStruct) {
  CompiledKernel k = get_or_compile(small_request("0.5f", props_.arch));
  CUfunction f = get_function(k, "scale");
  EXPECT_EQ(get_function(k, "scale"), f);  // the module is loaded once
  const int n = 1000;
  DeviceBuffer out(n * sizeof(float));
  out.zero();
  ScaleParams p{out.as<float>(), 3.0f, n};
  Stream stream;
  Event start, stop;
  start.record(stream.get());
  launch(f, {{(n + 255) / 256, 1, 1}, {256, 1, 1}, 0, stream.get(), {}}, p);
  stop.record(stream.get());
  stream.synchronize();
  EXPECT_GE(Event::elapsed_ms(start, stop), 0.0f);
  std::vector<float> host(n);
  out.download(host.data(), n * sizeof(float));
  for (int i = 0; i < n; ++i) ASSERT_EQ(host[i], 3.0f * i + 0.5f) << i;
}

TEST_F(Gpu, WrongParamsSizeIsAnError) {
  if (!driver().cuFuncGetParamInfo) GTEST_SKIP() << "driver older than CUDA 12.4";
  CompiledKernel k = get_or_compile(small_request("0", props_.arch));
  struct Smaller {
    float* out;
  } p{nullptr};
  try {
    launch(get_function(k, "scale"), {{1, 1, 1}, {32, 1, 1}, 0, nullptr, {}}, p);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("launch: params is 8 bytes but the kernel's parameter is 16 bytes"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(Gpu, LargeDynamicSharedMemory) {
  KernelRequest r;
  r.prefix = "test_big_smem";
  r.arch = props_.arch;
  r.source = R"(
struct P { int* out; int n; };
extern "C" __global__ void fill(const P p) {
  extern __shared__ int s[];
  for (int i = threadIdx.x; i < p.n; i += blockDim.x) s[i] = i;
  __syncthreads();
  int sum = 0;
  for (int i = threadIdx.x; i < p.n; i += blockDim.x) sum += s[p.n - 1 - i];
  atomicAdd(p.out, sum);
})";
  r.kernel_names = {"fill"};
  CompiledKernel k = get_or_compile(r);
  const int n = int(props_.smem_per_block_optin / sizeof(int));  // the whole opt-in budget
  DeviceBuffer out(sizeof(int));
  out.zero();
  struct {
    int* out;
    int n;
  } p{out.as<int>(), n};
  launch(get_function(k, "fill"), {{1, 1, 1}, {256, 1, 1}, size_t(n) * sizeof(int), nullptr, {}}, p);
  device_synchronize();
  int got = 0;
  out.download(&got, sizeof got);
  EXPECT_EQ(int64_t(got), int64_t(n) * (n - 1) / 2);
}

TEST_F(Gpu, UnknownFunctionNameIsAnError) {
  CompiledKernel k = get_or_compile(small_request("0", props_.arch));
  try {
    get_function(k, "nope");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kernel name: 'nope' is not a function of " + k.key), std::string::npos)
        << e.what();
  }
}

TEST_F(Gpu, BadDeviceIndexAndOversizedCopy) {
  try {
    use_device(1000);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device: expected an index in [0, "), std::string::npos) << e.what();
  }
  use_device(0);
  DeviceBuffer b(16);
  std::vector<char> host(32);
  try {
    b.upload(host.data(), host.size());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "DeviceBuffer::upload: bytes must be <= buffer size 16, got 32");
  }
}

}  // namespace
}  // namespace flexattn::jit
