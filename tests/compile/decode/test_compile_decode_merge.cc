// FLEXATTN_DECODE_MERGE (the last split of a row tile merges it; kernels/decode/attn_decode.cuh decode_merge_last):
// the source carries the define for every arch, the main entries compile without spills or a stack at head dims
// 64, 128 and 256 with and without mods, and -- with a disassembler -- they bump a counter with atomicInc and
// read the partials past L1, while the default source has neither. The counter pool (runtime/split_counters.h):
// one array per stream, grown by doubling, none while capturing.
#include <gtest/gtest.h>

#include <optional>
#include <thread>

#include "compile/compile_fixture.h"
#include "compile/decode/decode_build.h"
#include "compile/sm90/sass_tools.h"
#include "corpus.h"
#include "flexattn/codegen.h"
#include "flexattn/jit.h"
#include "flexattn/mods.h"
#include "runtime/decode_source.h"
#include "runtime/kernel_set.h"
#include "runtime/split_counters.h"

using namespace flexattn;

namespace {

using DecodeMergeCompile = compile_test::CompileTest;

jit::CompiledKernel compile_merge(const Variant& v, int d, const std::string& arch, bool merge) {
  runtime::DecodeTuning tuning = decode_test::base_tuning();
  tuning.merge = merge;
  std::string source;
  jit::CompiledKernel k = decode_test::compile_tuned(v, DType::BF16, d, d, arch, tuning,
                                                     merge ? "attn_decode_merge_on" : "attn_decode_merge_off", &source);
  EXPECT_EQ(source.find("#define FLEXATTN_DECODE_MERGE 1") != std::string::npos, merge);
  return k;
}

}  // namespace

TEST_F(DecodeMergeCompile, MergeCompilesWithoutSpillsAndCountsSplits) {
  Variant plain, windowed;
  windowed.mask_mod = mods::sliding_window(4096);
  windowed.score_mod = mods::softcap(30);
  for (const char* arch : {"sm_90a", "sm_80"})
    for (int d : {64, 128, 256})
      for (const Variant* v : {&plain, &windowed}) {
        const std::string what = std::string(v == &plain ? "plain" : "window+softcap") + " D=" + std::to_string(d) + " " + arch;
        const jit::CompiledKernel on = compile_merge(*v, d, arch, true);
        decode_test::expect_clean(on, what);
        if (d != 128) continue;
        const jit::CompiledKernel off = compile_merge(*v, d, arch, false);
        decode_test::for_each_main_entry(on, off, d, what, [](const std::string& a, const std::string& b,
                                                              const std::string& where) {
          EXPECT_EQ(testing_sass::count(a, "ATOMG.E.INC"), 1) << where << ": the split counter";
          EXPECT_EQ(testing_sass::count(b, "ATOMG"), 0) << where;
          EXPECT_GT(testing_sass::count(a, ".STRONG.GPU"), testing_sass::count(b, ".STRONG.GPU"))
              << where << ": partials read past L1 (ld.global.cg)";
          EXPECT_EQ(testing_sass::count(a, "LDL") + testing_sass::count(a, "STL"), 0) << where;
        });
      }
}

TEST(SplitCounterPool, OneArrayPerStreamGrownByDoublingNoneWhileCapturing) {
  std::vector<size_t> allocated;
  uintptr_t next = 0x10000;
  runtime::SplitCounterPool pool([&](size_t bytes, void*) {
    allocated.push_back(bytes);
    const uintptr_t p = next;
    next += 0x10000;
    return p;
  });
  void* s1 = reinterpret_cast<void*>(0x100);
  void* s2 = reinterpret_cast<void*>(0x200);
  unsigned* a = pool.counters(0, s1, 64, false, false);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(pool.counters(0, s1, 64, false, false), a);  // the same stream keeps its array
  EXPECT_EQ(pool.counters(0, s1, 10, false, false), a);  // fewer fit
  unsigned* b = pool.counters(0, s2, 64, false, false);  // another stream: its own
  EXPECT_NE(b, a);
  EXPECT_NE(pool.counters(1, s1, 64, false, false), a);  // another device: its own
  unsigned* grown = pool.counters(0, s1, 65, false, false);
  EXPECT_NE(grown, a);
  EXPECT_EQ(allocated.back(), 128 * sizeof(unsigned));  // doubled
  EXPECT_EQ(pool.counters(0, s1, 128, false, false), grown);
  const size_t arrays = pool.arrays();
  EXPECT_EQ(pool.counters(0, s1, 8, true, false), nullptr);  // capturing: none, nothing allocated
  EXPECT_EQ(pool.arrays(), arrays);
  EXPECT_EQ(pool.counters(0, s1, 0, false, false), nullptr);
  // The per-thread default stream: one array per host thread.
  void* per_thread = reinterpret_cast<void*>(0x2);
  unsigned* mine = pool.counters(0, per_thread, 16, false, true);
  unsigned* theirs = nullptr;
  std::thread t([&] { theirs = pool.counters(0, per_thread, 16, false, true); });
  t.join();
  EXPECT_NE(mine, theirs);
  EXPECT_EQ(pool.counters(0, per_thread, 16, false, true), mine);
}

TEST(SplitCounterPool, NoMemoryGivesNone) {
  runtime::SplitCounterPool pool([](size_t, void*) -> uintptr_t { return 0; });
  EXPECT_EQ(pool.counters(0, nullptr, 16, false, false), nullptr);
  EXPECT_EQ(pool.arrays(), 0u);
}
