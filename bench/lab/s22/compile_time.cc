// Session 22 (no GPU): where the sm90 forward's cold compile goes, per corpus variant, on this machine.
// NVRTC's --time=<csv> splits front end (parse + instantiate) from NVVM optimisation and ptxas.
// Build: see compile_time.sh. Usage: compile_time NAME... (corpus names) [--opt=<nvrtc option>]...
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "corpus.h"
#include "flexattn/block_mask_gpu.h"
#include "flexattn/codegen.h"
#include "jit/nvrtc.h"
#include "runtime/kernel_set.h"
#include "runtime/tma_sm90.h"

using namespace flexattn;

int main(int argc, char** argv) {
  std::vector<std::string> names, opts;
  int d = 128;
  bool dump = false, beside = false, builder = false, backward = false, tall = false;
  std::string src_file;  // --src=FILE: compile this source instead (named by the first corpus name)
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--opt=", 0) == 0) opts.push_back(a.substr(6));
    else if (a.rfind("--d=", 0) == 0) d = std::atoi(a.c_str() + 4);
    else if (a == "--dump") dump = true;
    else if (a == "--beside") beside = true;
    else if (a == "--builder") builder = true;  // the block-mask builder of the mask_mod instead
    else if (a == "--bwd") backward = true;     // the backward kernel instead of the forward
    else if (a == "--tall") tall = true;        // the forward's tall tile (a call without a block mask)
    else if (a.rfind("--src=", 0) == 0) src_file = a.substr(6);
    else names.push_back(a);
  }
  for (const std::string& n : names) {
    mods::ProblemShape shape{1, 4, 4, 256, 256, d, d, 1};
    corpus::BuiltVariant b = corpus::build_variant(corpus::corpus_entry(n), shape);
    runtime::KernelSetKey key{DType::BF16, d, d, "sm_90a", backward, runtime::KernelFamily::sm90};
    key.sm90_fwd_tall = tall;
    codegen::GeneratedVariant gen = codegen::emit_cuda_variant(b.variant, backward);
    std::string src = runtime::kernel_source_sm90(gen, key);
    if (builder) {
      Variant mv;
      mv.mask_mod = b.variant.mask_mod;
      src = block_mask_build_source(codegen::emit_cuda_variant(mv, false).source);
    }
    if (!src_file.empty()) {
      std::stringstream file;
      file << std::ifstream(src_file).rdbuf();
      src = file.str();
    }
    if (dump) {
      std::ofstream("/tmp/s22_" + std::string(backward ? "bwd_" : "") + std::to_string(d) + "_" + n + ".cu") << src;
    }
    std::vector<std::string> o = opts;
    std::string csv = "/tmp/s22_time.csv";
    std::remove(csv.c_str());
    o.push_back("--time=" + csv);
    std::thread bwd;
    double bwd_s = 0;
    if (beside) {  // the backward's compile beside the forward's, as the bench's --compile-jobs 2
      runtime::KernelSetKey bkey = key;
      bkey.backward = true;
      std::string bsrc = runtime::kernel_source_sm90(codegen::emit_cuda_variant(b.variant, true), bkey);
      bwd = std::thread([bsrc, n, &bwd_s] {
        auto b0 = std::chrono::steady_clock::now();
        jit::nvrtc_compile(bsrc, n + "_bwd", "sm_90a", {});
        bwd_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
      });
    }
    auto t0 = std::chrono::steady_clock::now();
    jit::CompileResult r = jit::nvrtc_compile(src, n, "sm_90a", o);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (dump) std::ofstream("/tmp/s22_" + std::string(backward ? "bwd_" : "") + std::to_string(d) + "_" + n + ".cubin", std::ios::binary) << r.cubin;
    if (bwd.joinable()) bwd.join();
    if (beside) std::printf("   backward beside: %.2f s\n", bwd_s);
    std::ifstream f(csv);
    std::stringstream ss;
    ss << f.rdbuf();
    const jit::PtxasInfo& info = r.ptxas.begin()->second;
    std::printf("== %s D=%d total %.2f s regs %d spills %d cubin %zu\n%s", n.c_str(), d, s, info.registers,
                info.spill_stores + info.spill_loads, r.cubin.size(), ss.str().c_str());
  }
}
