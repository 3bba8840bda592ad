// Several processes compiling the same key at once: all succeed, one entry remains, no scratch left.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "jit_test_util.h"

namespace flexattn::jit {
namespace {
namespace fs = std::filesystem;
using testing::CacheTest;
using testing::small_request;

using CacheProcesses = CacheTest;

TEST_F(CacheProcesses, ForkedChildrenCompilingOneKeyLeaveOneValidEntry) {
  constexpr int kChildren = 4;
  KernelRequest r = small_request("11");
  int gate[2];
  ASSERT_EQ(pipe(gate), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < kChildren; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(gate[1]);
      char c;
      (void)!read(gate[0], &c, 1);  // returns when the parent closes the gate: all start together
      int rc = 1;
      try {
        CompiledKernel k = get_or_compile(r);
        rc = k.cubin && !k.cubin->empty() && !k.entry_dir.empty() ? 0 : 2;
      } catch (...) {
        rc = 3;
      }
      _exit(rc);
    }
    children.push_back(pid);
  }
  close(gate[0]);
  close(gate[1]);
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child exit status " << status;
  }
  auto entries = cache_list();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_TRUE(entries[0].valid);
  for (const auto& e : fs::directory_iterator(cache_dir()))
    EXPECT_EQ(e.path().filename().string().rfind(".tmp-", 0), std::string::npos) << e.path();
  JitStats s0 = jit_stats();
  EXPECT_EQ(get_or_compile(r).origin, CompiledKernel::Origin::disk);
  EXPECT_EQ(jit_stats().compiles, s0.compiles);
}

}  // namespace
}  // namespace flexattn::jit
