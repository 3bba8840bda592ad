#pragma once
// The subcommands of the flexattn tool. Each returns the process exit code (0 ok, 1 a --check or bench
// comparison failed) and throws flexattn::Error for bad input (main prints it and exits with 2).
#include <string>
#include <vector>

#include "args.h"
#include "problem.h"

namespace flexattn::cli {

int cmd_info(const std::vector<std::string>& argv);
int cmd_run(const std::vector<std::string>& argv);
int cmd_mask(const std::vector<std::string>& argv);
int cmd_bench(const std::vector<std::string>& argv);
int cmd_cache(const std::vector<std::string>& argv);
// flexattn bench --suite decode (tools/bench_decode.cc): the decode family on issue 7's shapes, timed;
// each shape once per entry of `splits` (0 = the heuristic's count; "--splits 0,8,64").
// batch > 0: only the shapes of that batch; shuffle: paged shapes get a random page permutation.
int run_decode_suite(const std::vector<int>& splits = {0}, int64_t batch = 0, bool shuffle = false);

// The bench suite (also compiled by `cache prewarm`).
struct BenchCase {
  const char* name;
  const char* mask;        // registry spec or ""
  const char* mask_expr;   // text or ""
  const char* score;
  const char* score_expr;
  int64_t hkv;             // -1: = H
};
const std::vector<BenchCase>& quick_suite();
ProblemConfig bench_config(const BenchCase& c, DType dtype, uint64_t seed);

// `bench --suite short|full`: bench/run.py's cases (full, causal, sliding1024, document, prefixlm,
// alibi_causal, softcap_causal, relbias_full) in the registry's terms, for KV length S.
struct PeerCase {
  std::string name, mask, mask_expr, score;
};
std::vector<PeerCase> peer_cases(int64_t S);
// Attended (q, kv) entries over every (b, h) of p: full tiles of `bm` by area, partial tiles element by
// element (the mask is evaluated only where the block mask says it matters); bm null = dense.
double attended_entries(const Problem& p, const BlockMask* bm);

// The problem flags shared by run and mask, and their translation into a ProblemConfig.
std::vector<FlagSpec> problem_flags();
ProblemConfig problem_config(const Args& args);
// The help text of the registry ("  causal  q_idx >= kv_idx" per mod).
std::string registry_help();
void reject_positional(const Args& args, const std::string& command);

}  // namespace flexattn::cli
