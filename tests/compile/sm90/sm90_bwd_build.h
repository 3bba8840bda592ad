#pragma once
// How the sm90 backward compile tests build a kernel set with chosen switches.
#include <stdlib.h>

#include <initializer_list>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "flexattn/codegen.h"
#include "flexattn/jit.h"
#include "runtime/kernel_set.h"
#include "runtime/sm90_backward.h"

namespace flexattn::sm90_test {

// A compiled sm90 backward set is clean: its entries (the main kernel; the preprocess and dQ convert of its aux
// program when it has one) without spill or stack frame, the main kernel inside the launch's register cap, ptxas
// without warnings (no C7510-C7515 wgmma serialization).
inline void expect_clean(const runtime::KernelSet& set, const std::string& what) {
  for (const jit::CompiledKernel* c : {&set.compiled, &set.aux})
    for (const std::string& name : c->kernel_names) {
      ASSERT_EQ(c->ptxas.count(name), 1u) << what << " " << name << "\n" << c->log;
      const jit::PtxasInfo& info = c->ptxas.at(name);
      EXPECT_EQ(info.spill_stores + info.spill_loads, 0) << what << " " << name << " spills";
      EXPECT_EQ(info.stack, 0) << what << " " << name << " has a stack frame";
    }
  ASSERT_EQ(set.compiled.ptxas.count("flexattn_bwd"), 1u) << what;
  // __launch_bounds__(384, 1): the entry allocation is capped at 65536 / 384 rounded down to 8.
  EXPECT_LE(set.compiled.ptxas.at("flexattn_bwd").registers, 168) << what;
  EXPECT_EQ(set.compiled.log.find("warning"), std::string::npos) << what << " ptxas warned:\n" << set.compiled.log;
  EXPECT_EQ(set.compiled.log.find("serialized"), std::string::npos) << what << ":\n" << set.compiled.log;
}


struct BwdBuild {
  std::string source;
  runtime::KernelSet set;  // compiled, layout and key
};

// The sm90 backward set of `v` (dtype t, head dims d / dv) for sm_90a, its source generated with each
// named FLEXATTN_SM90_BWD_* switch set to 1 or 0 (unset afterwards) and compiled under `prefix`. This
// bypasses the in-process set cache (get_kernel_set keys a set by the variant's interned nodes, not by
// the switches); the disk cache is keyed by the source, which carries them.
inline BwdBuild compile_bwd_with(const Variant& v, DType t, int d, int dv, const std::string& prefix,
                                 std::initializer_list<std::pair<const char*, bool>> switches) {
  for (const auto& [name, on] : switches) setenv(name, on ? "1" : "0", 1);
  BwdBuild b;
  b.set.key = runtime::KernelSetKey{t, d, dv, "sm_90a", true, runtime::KernelFamily::sm90};
  const codegen::GeneratedVariant gen = codegen::emit_cuda_variant(v, true);
  b.set.layout = gen.layout;
  b.source = runtime::kernel_source_sm90_bwd(gen, b.set.key);
  jit::KernelRequest req;
  req.prefix = prefix;
  req.source = b.source;
  req.arch = "sm_90a";
  req.kernel_names = {"flexattn_bwd"};
  b.set.compiled = jit::get_or_compile(req);
  // As get_kernel_set (sm90_bwd_fallback_sources): a main kernel that spills is rebuilt without the rank warp first,
  // then without the grouped launch order too.
  auto spills = [&] {
    const jit::PtxasInfo& main = b.set.compiled.ptxas["flexattn_bwd"];
    return main.spill_stores + main.spill_loads + main.stack > 0;
  };
  int rank_warp = -1;
  if (spills() && runtime::sm90_bwd_source_choice(b.source).rank_warp) {
    rank_warp = 0;
    req.source = b.source = runtime::kernel_source_sm90_bwd(gen, b.set.key, -1, -1, -1, -1, -1, 0);
    b.set.compiled = jit::get_or_compile(req);
  }
  if (spills() && runtime::sm90_bwd_source_choice(b.source).grid_order) {
    req.source = b.source = runtime::kernel_source_sm90_bwd(gen, b.set.key, -1, -1, -1, 0, -1, rank_warp);
    b.set.compiled = jit::get_or_compile(req);
  }
  for (const auto& sw : switches) unsetenv(sw.first);
  return b;
}

}  // namespace flexattn::sm90_test
