// The problem flags shared by `run` and `mask`.
#include "commands.h"
#include "flexattn/error.h"
#include "flexattn/mods.h"

namespace flexattn::cli {

std::vector<FlagSpec> problem_flags() {
  return {
      {"-B", "N", false, "batch size (default 1)"},
      {"-H", "N", false, "query heads (default 4)"},
      {"--hkv", "N", false, "key/value heads; -H must be a multiple (GQA; default -H)"},
      {"-Q", "N", false, "query length (default 128)"},
      {"--kv", "N", false, "key/value length (default -Q)"},
      {"-D", "N", false, "q/k head dim (default 64)"},
      {"--dv", "N", false, "v head dim (default -D)"},
      {"--dtype", "f32|f16|bf16", false, "input dtype (default f32)"},
      {"--mask", "NAME[:ARGS]", false, "a mask from the mod library (list below)"},
      {"--mask-expr", "TEXT", false, "a mask_mod in the text form, e.g. 'q_idx >= kv_idx'"},
      {"--score", "NAME[:ARGS]", false, "a score mod from the mod library (list below)"},
      {"--score-expr", "TEXT", false, "a score_mod in the text form, e.g. 'score * 0.5'"},
      {"--buffer", "NAME=FILE.npy", true, "a captured buffer read by the mods (repeatable)"},
      {"--scalar", "NAME[:TYPE]=VALUE", true,
       "a named scalar (repeatable); TYPE f32|i32|i64|bool, default i32 for integers, else f32"},
      {"--seed", "N", false, "seed of the random inputs and buffers (default 0)"},
      {"--load", "DIR", false, "read q, k, v (and dout, buffer_<name>) .npy files from DIR"},
  };
}

ProblemConfig problem_config(const Args& args) {
  constexpr int64_t kMax = int64_t(1) << 31;
  ProblemConfig c;
  c.B = args.get_int("-B", -1, 1, kMax);
  c.H = args.get_int("-H", -1, 1, kMax);
  c.Hkv = args.get_int("--hkv", -1, 1, kMax);
  c.Q = args.get_int("-Q", -1, 1, kMax);
  c.KV = args.get_int("--kv", -1, 1, kMax);
  c.D = args.get_int("-D", -1, 1, kMax);
  c.Dv = args.get_int("--dv", -1, 1, kMax);
  c.dtype = args.get_dtype("--dtype", DType::F32, {DType::F32, DType::F16, DType::BF16});
  c.mask_spec = args.get("--mask");
  c.mask_expr = args.get("--mask-expr");
  c.score_spec = args.get("--score");
  c.score_expr = args.get("--score-expr");
  check(!args.has("--mask-expr") || !c.mask_expr.empty(), "--mask-expr: empty expression");
  check(!args.has("--score-expr") || !c.score_expr.empty(), "--score-expr: empty expression");
  check(!args.has("--mask") || !c.mask_spec.empty(), "--mask: empty mod name");
  check(!args.has("--score") || !c.score_spec.empty(), "--score: empty mod name");
  for (const std::string& b : args.all("--buffer")) c.buffer_files.push_back(split_assignment("--buffer", b));
  c.scalar_args = args.all("--scalar");
  c.seed = args.get_u64("--seed", 0);
  c.load_dir = args.get("--load");
  return c;
}

std::string registry_help() {
  std::string s;
  for (const mods::RegistryEntry& e : mods::registry()) {
    std::string left = "  " + e.syntax;
    if (left.size() < 36) left.append(36 - left.size(), ' ');
    else left += "\n" + std::string(36, ' ');
    s += left + (e.is_mask ? "[mask]  " : "[score] ") + e.doc + "\n";
  }
  return s;
}

void reject_positional(const Args& args, const std::string& command) {
  check(args.positional().empty(), "unexpected argument '" + (args.positional().empty() ? "" : args.positional()[0]) +
                                       "' for '" + command + "'");
}

}  // namespace flexattn::cli
