// Writes the generated kernel sources that sass_diff_s6.sh compiles against two kernels/ trees: the
// sm90 forward and backward, the sm80 backward (and sm80 forward, decode) of corpus variants at D = 64 and 128, for the default
// switches and the replaced paths (one file per source, named <family>_<config>_<variant>_d<D>.cu).
// The sources depend only on the host code (codegen + runtime), not on kernels/, so one set serves both
// trees. Usage: gen_sources OUTDIR
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "corpus.h"
#include "flexattn/codegen.h"
#include "runtime/decode_source.h"
#include "runtime/kernel_set.h"
#include "runtime/sm90_backward.h"
#include "runtime/tma_sm90.h"

using namespace flexattn;

namespace {

std::string out_dir;
int written = 0;

void put(const std::string& name, const std::string& src) {
  std::ofstream(out_dir + "/" + name + ".cu") << src;
  ++written;
}

std::string tag(const std::string& corpus_name) {
  std::string t;
  for (char c : corpus_name) t += (std::isalnum((unsigned char)c) ? c : '_');
  return t;
}

// env: name=value pairs set for the call ("" value = unset), restored (unset) after it.
template <class F>
std::string with_env(const std::vector<std::pair<const char*, const char*>>& env, F f) {
  for (auto& [k, v] : env) *v ? setenv(k, v, 1) : unsetenv(k);
  std::string s = f();
  for (auto& [k, v] : env) unsetenv(k);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gen_sources OUTDIR\n");
    return 2;
  }
  out_dir = argv[1];
  for (const char* k : {"FLEXATTN_SM90_AFFINE", "FLEXATTN_SM90_UDESC", "FLEXATTN_SM90_ILP", "FLEXATTN_SM90_LAZY",
                        "FLEXATTN_SM90_PERSISTENT", "FLEXATTN_SM90_BWD_V2", "FLEXATTN_SM90_BWD_V3",
                        "FLEXATTN_SM90_BWD_DQ_BULK", "FLEXATTN_SM90_BWD_BG_REDUCE"})
    unsetenv(k);
  // The replaced paths run on this subset (identity, a mask, ALiBi (affine), softcap, buffer gradients
  // of both reduce kinds, T5, a text mod); the defaults on the whole corpus.
  const std::vector<std::string> subset = {"full", "causal", "alibi+causal", "softcap:30+causal", "relbias(learnable)",
                                           "alibi_slopes(learnable)+causal", "t5", "text:mixed"};
  for (const corpus::CorpusEntry& c : corpus::mod_corpus()) {
    bool in_subset = false;
    for (const auto& n : subset) in_subset |= n == c.name;
    for (int d : {64, 128}) {
      mods::ProblemShape shape{1, 4, 4, 256, 256, d, d, 1};
      const Variant v = corpus::build_variant(c, shape).variant;
      const std::string sfx = "_" + tag(c.name) + "_d" + std::to_string(d);
      const codegen::GeneratedVariant fwd = codegen::emit_cuda_variant(v, false);
      const codegen::GeneratedVariant bwd = codegen::emit_cuda_variant(v, true);
      runtime::KernelSetKey fk{DType::BF16, d, d, "sm_90a", false, runtime::KernelFamily::sm90};
      runtime::KernelSetKey bk{DType::BF16, d, d, "sm_90a", true, runtime::KernelFamily::sm90};
      auto fsrc = [&] { return runtime::kernel_source_sm90(fwd, fk); };
      // Forward: defaults (AFFINE on; UDESC / ILP / LAZY on at D = 128 only), then ILP and LAZY flipped.
      put("fwd90_def" + sfx, with_env({}, fsrc));
      if (in_subset) {
        const char* flip = d == 128 ? "0" : "1";
        put("fwd90_ilpflip" + sfx, with_env({{"FLEXATTN_SM90_ILP", flip}}, fsrc));
        put("fwd90_lazyflip" + sfx, with_env({{"FLEXATTN_SM90_LAZY", flip}}, fsrc));
      }
      // Backward: defaults (D = 128: v2 + bulk dQ + v3; D = 64: first kernel + bulk + v3; BG_REDUCE on).
      auto bsrc = [&](int bulk, int bg) { return [&, bulk, bg] { return runtime::kernel_source_sm90_bwd(bwd, bk, bulk, bg); }; };
      put("bwd90_def" + sfx, with_env({}, bsrc(-1, -1)));
      if (in_subset) {
        put("bwd90_v3off" + sfx, with_env({{"FLEXATTN_SM90_BWD_V3", "0"}}, bsrc(-1, -1)));
        put("bwd90_red" + sfx, with_env({}, bsrc(0, -1)));
        if (bwd.buffer_grad_reduce != 0) {
          put("bwd90_bg0" + sfx, with_env({}, bsrc(-1, 0)));
          put("bwd90_redbg0" + sfx, with_env({}, bsrc(0, 0)));
        }
        if (d == 128) {  // the first kernel at D = 128 (padded dQ tiles: v3 is D = 64 only there)
          put("bwd90_v2off" + sfx, with_env({{"FLEXATTN_SM90_BWD_V2", "0"}}, bsrc(-1, -1)));
          put("bwd90_v2offred" + sfx, with_env({{"FLEXATTN_SM90_BWD_V2", "0"}}, bsrc(0, -1)));
        }
        // sm80 backward (backward_entry) and the deterministic dQ pass.
        runtime::KernelSetKey k80{DType::BF16, d, d, "sm_80", true, runtime::KernelFamily::sm80};
        put("bwd80_def" + sfx, runtime::kernel_source(bwd, k80));
        put("bwd80_dqpass" + sfx, runtime::kernel_source(bwd, runtime::dq_pass_key(k80)));
        // Forward kernels that include sm80/scores_sm80.cuh (sm80 forward on sm_80, decode on sm_90a).
        put("fwd80_def" + sfx, runtime::kernel_source(fwd, runtime::KernelSetKey{DType::BF16, d, d, "sm_80", false}));
        put("dec90_def" + sfx, runtime::kernel_source_decode(fwd, runtime::KernelSetKey{DType::BF16, d, d, "sm_90a", false,
                                                                                         runtime::KernelFamily::decode}));
      }
    }
  }
  std::printf("%d sources in %s\n", written, out_dir.c_str());
  return 0;
}
