#pragma once
// What the decode compile tests share: a decode set built with explicit tuning (decode_tuning() is read once per
// process, so a test cannot switch a knob through the environment), the spill / stack check of its entries, and the
// SASS of its main entries from two builds side by side.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "compile/sm90/sass_tools.h"
#include "flexattn/codegen.h"
#include "flexattn/jit.h"
#include "runtime/decode_source.h"
#include "runtime/kernel_set.h"

namespace flexattn::decode_test {

// The session-4 defaults (PDL, the bulk ring) with every other knob off: what a test then turns on is all that
// differs from the plain source.
inline runtime::DecodeTuning base_tuning() {
  runtime::DecodeTuning t;
  t.pdl = t.bulk = true;
  return t;
}

// The decode set of `v` for `tuning`, generated and compiled the way get_kernel_set does, under `prefix` (the disk
// cache is keyed by the source); *source, when given, gets the generated source.
inline jit::CompiledKernel compile_tuned(const Variant& v, DType t, int d, int dv, const std::string& arch,
                                         const runtime::DecodeTuning& tuning, const std::string& prefix,
                                         std::string* source = nullptr) {
  const runtime::KernelSetKey key{t, d, dv, arch, false, runtime::KernelFamily::decode};
  jit::KernelRequest req;
  req.prefix = prefix + "_d" + std::to_string(d) + "_dv" + std::to_string(dv);
  req.source = runtime::kernel_source_decode(codegen::emit_cuda_variant(v, false), key, tuning);
  if (source) *source = req.source;
  req.arch = arch;
  req.kernel_names = runtime::decode_kernel_names(d, dv, runtime::decode_tma_source(arch, tuning, d, dv));
  return jit::get_or_compile(req);
}

// No spill and no stack frame in any entry; prints each entry's registers and returns the most.
inline int expect_clean(const jit::CompiledKernel& k, const std::string& what) {
  int most = 0;
  for (const auto& [fn, info] : k.ptxas) {
    EXPECT_EQ(info.spill_stores + info.spill_loads, 0) << what << ": " << fn << " spills";
    EXPECT_EQ(info.stack, 0) << what << ": " << fn << " has a stack frame";
    std::printf("  %-40s %-32s %3d regs\n", what.c_str(), fn.c_str(), info.registers);
    most = std::max(most, info.registers);
  }
  return most;
}

// Whether an entry's machine code (its ELF .text section, no disassembler needed) is the same in two builds.
inline bool same_entry_code(const jit::CompiledKernel& a, const jit::CompiledKernel& b, const std::string& entry,
                            const std::string& what) {
  const std::optional<std::string> ta = testing_sass::elf_section(*a.cubin, ".text." + entry);
  const std::optional<std::string> tb = testing_sass::elf_section(*b.cubin, ".text." + entry);
  EXPECT_TRUE(ta && tb) << what << ": no .text for " << entry;
  return ta && tb && *ta == *tb;
}

// check(sass_on, sass_off, label) for every main entry (the row tiles, not the combine kernel) of two builds of a set
// of head dim d; nothing without a disassembler.
template <class Check>
void for_each_main_entry(const jit::CompiledKernel& on, const jit::CompiledKernel& off, int d, const std::string& what,
                         Check check) {
  std::string why;
  const std::optional<std::string> sass_on = testing_sass::disassemble(*on.cubin, &why);
  const std::optional<std::string> sass_off = testing_sass::disassemble(*off.cubin, &why);
  if (!sass_on || !sass_off) {
    std::printf("  %s: no disassembler (%s); the SASS checks are skipped\n", what.c_str(), why.c_str());
    return;
  }
  for (const std::string& entry : runtime::decode_kernel_names(d, d)) {
    if (entry == "flexattn_decode_combine") continue;
    const std::string a = testing_sass::function_sass(*sass_on, entry);
    const std::string b = testing_sass::function_sass(*sass_off, entry);
    ASSERT_FALSE(a.empty() || b.empty()) << what << " " << entry;
    check(a, b, what + " " + entry);
  }
}

}  // namespace flexattn::decode_test
