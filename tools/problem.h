#pragma once
// One attention problem as the CLI sets it up: shapes, the variant (from the mod registry or from
// text), its buffers and scalars, and deterministic random inputs. Shared by `run`, `mask` and `bench`.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "flexattn/block_mask.h"
#include "flexattn/mods.h"
#include "flexattn/tensor.h"
#include "flexattn/variant.h"

namespace flexattn::cli {

struct ProblemConfig {
  int64_t B = 1, H = 4, Hkv = -1, Q = 128, KV = -1, D = 64, Dv = -1;  // -1: same as H / Q / D
  DType dtype = DType::F32;
  std::string mask_spec, mask_expr, score_spec, score_expr;
  std::vector<std::pair<std::string, std::string>> buffer_files;  // --buffer name=FILE.npy
  std::vector<std::string> scalar_args;                           // --scalar name[:type]=VALUE
  uint64_t seed = 0;
  std::string load_dir;  // --load: q.npy, k.npy, v.npy (dout.npy, buffer_<name>.npy if present)
  bool backward = false;
  bool make_inputs = true;  // false: no q / k / v / dout (the `mask` command needs none)
};

struct Problem {
  mods::ProblemShape shape;
  DType dtype = DType::F32;
  std::string label;  // "mask=causal score=softcap:30"
  Variant variant;
  std::map<std::string, HostTensor> buffers;  // every buffer the mods read
  std::map<std::string, double> scalars;      // every scalar the mods read
  HostTensor q, k, v, dout;                   // dout only when backward
  ModBindings bindings() const;               // views into `buffers` (valid while *this lives)
};

// Validates everything a user can get wrong and throws flexattn::Error with a one-line message
// naming the flag: shapes, GQA ratio, unknown mods, malformed expressions (the parser's
// "line L, column C" message), missing / unused / ill-shaped buffers and scalars, unreadable files.
Problem make_problem(const ProblemConfig& config);

// The BlockMask of the problem's mask with square blocks of `block`; B / H are 1 unless the mask reads
// b / h. The mask is evaluated with the IR interpreter, or, for a mask that keeps one kv interval per row
// (ir::kv_range: causal, sliding windows, prefix-LM, ...) and use_kv_range, from each row's bounds
// (build_block_mask_from_ranges; the same block mask: tests/cli/tool/test_check.cc).
BlockMask make_block_mask(const Problem& p, int block, bool use_kv_range = true);

// "--scalar name[:type]=value" -> name, type, value (type: f32 / i32 / i64 / bool; without it an integer
// literal is i32 and anything else f32).
struct ScalarArg {
  std::string name;
  DType type = DType::F32;
  double value = 0;
  bool typed = false;  // the type was written (NAME:TYPE=VALUE), not inferred from the value
};
ScalarArg parse_scalar_arg(const std::string& text);

// t converted element-wise to dtype d (rounded as a cast would); t itself if it already is d.
HostTensor cast_tensor(const HostTensor& t, DType d);

}  // namespace flexattn::cli
