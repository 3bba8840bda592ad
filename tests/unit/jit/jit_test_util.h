#pragma once
// Helpers shared by the JIT tests: a temporary folder and scoped environment variables.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <string>

#include "flexattn/jit.h"

namespace flexattn::jit::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "flexattn-jit-test-XXXXXX").string();
    char* p = mkdtemp(tmpl.data());
    if (!p) throw std::runtime_error("mkdtemp failed");
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

// Sets (or, with nullopt, unsets) an environment variable for the scope; restores it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value) setenv(name, value->c_str(), 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_.c_str(), old_->c_str(), 1);
    else unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// A fresh cache folder and an empty in-process cache for each test.
class CacheTest : public ::testing::Test {
 protected:
  void SetUp() override { clear_memory_cache(); }
  void TearDown() override { clear_memory_cache(); }
  TempDir tmp_;
  ScopedEnv cache_env_{"FLEXATTN_CACHE_DIR", tmp_.path()};
  ScopedEnv require_env_{"FLEXATTN_JIT_REQUIRE_CACHE", std::nullopt};
};

// A small, fast-to-compile kernel; `tag` changes the source (and so the key).
inline KernelRequest small_request(const std::string& tag = "0", const std::string& arch = "sm_80") {
  KernelRequest r;
  r.prefix = "test_scale_" + arch;
  r.arch = arch;
  r.source = "struct P { float* out; float a; int n; };\n"
             "extern \"C\" __global__ void scale(const P p) {\n"
             "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
             "  if (i < p.n) p.out[i] = p.a * i + " + tag + ";\n"
             "}\n";
  r.kernel_names = {"scale"};
  return r;
}

}  // namespace flexattn::jit::testing
