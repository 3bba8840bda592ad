#pragma once
// What the NVRTC compile-tier tests share: they skip without NVRTC, and compile into a private kernel
// cache (they measure compiles -- registers, spills, SASS -- and must not trust an entry that an older
// build left in the user's cache, whose key would not see a changed header outside the bundle).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "flexattn/jit.h"

namespace flexattn::compile_test {

// NVRTC was found (asked once per program: jit_info() searches for the library).
inline bool nvrtc_found() {
  static const bool found = jit::jit_info().nvrtc_found;
  return found;
}

// The test program's private kernel cache: a fresh folder below /tmp, made when first asked for and
// removed (with what the tests compiled into it) when the program exits. Empty when mkdtemp failed.
inline const std::string& private_cache_dir() {
  struct Dir {
    std::string path;
    Dir() {
      char tmpl[] = "/tmp/flexattn-compile-test-XXXXXX";
      if (const char* d = mkdtemp(tmpl)) path = d;
    }
    ~Dir() {
      std::error_code ec;
      if (!path.empty()) std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

// Fixture of the tests that compile: skipped without NVRTC; FLEXATTN_CACHE_DIR names the program's
// private cache (one per program, so kernels one test compiled are on disk for the next).
class CompileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!nvrtc_found()) GTEST_SKIP() << "NVRTC not found: " << jit::jit_info().nvrtc_error;
    ASSERT_FALSE(private_cache_dir().empty()) << "mkdtemp failed: no private kernel cache below /tmp";
    setenv("FLEXATTN_CACHE_DIR", private_cache_dir().c_str(), 1);
  }
};

}  // namespace flexattn::compile_test
