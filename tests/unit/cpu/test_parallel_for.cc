// detail::parallel_for when threads cannot all start (a memory-capped container, a process limit): the tasks still
// run, each once. Its workers were a std::thread vector, and the std::system_error of a failing start destroyed
// joinable threads: std::terminate.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <vector>

#include "cpu/reference_problem.h"

namespace flexattn::cpu::detail {
namespace {

// The process's mapped bytes now (/proc/self/statm: size in pages).
long long mapped_bytes() {
  long long pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%lld", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return pages * sysconf(_SC_PAGESIZE);
}

TEST(ParallelFor, ThreadsThatCannotStartLeaveTheirTasksToTheOthers) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // 1000 threads of 8 MiB stacks do not fit 256 MiB more address space: most starts fail.
    constexpr int64_t kTasks = 20000;
    std::vector<std::atomic<int>> runs(kTasks);
    std::atomic<int> max_thread{0};
    const rlimit cap{rlim_t(mapped_bytes() + (256ll << 20)), rlim_t(mapped_bytes() + (256ll << 20))};
    if (setrlimit(RLIMIT_AS, &cap) != 0) _exit(3);
    try {
      parallel_for(kTasks, 1000, [&](int64_t task, int thread) {
        runs[size_t(task)]++;
        for (int m = max_thread.load(); thread > m && !max_thread.compare_exchange_weak(m, thread);) {
        }
      });
    } catch (...) {
      _exit(4);
    }
    for (const auto& r : runs)
      if (r.load() != 1) _exit(5);
    _exit(max_thread.load() < 999 ? 0 : 6);  // 6: every thread started, the cap did not bite
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  if (WEXITSTATUS(status) == 6) GTEST_SKIP() << "every thread started under the address-space cap";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace flexattn::cpu::detail
