// `flexattn bench --suite short|full`: the cases are bench/run.py's, and the attended-entry count behind
// their TFLOP/s matches closed forms (full tiles by area, partial tiles evaluated, tails clipped).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "commands.h"
#include "problem.h"

using namespace flexattn;
using namespace flexattn::cli;

namespace {

// Per (b, h) entries of each case's mask for KV length S, written from the definitions.
double closed_form(const std::string& name, int64_t S) {
  double n = 0;
  const int64_t doc = S / 8, prefix = S / 4;
  for (int64_t q = 0; q < S; ++q) {
    if (name == "full" || name == "relbias_full") n += S;
    else if (name == "sliding1024") n += std::min<int64_t>(q + 1, 1024);
    else if (name == "document") n += q - (q / doc) * doc + 1;
    else if (name == "prefixlm") n += std::max(q + 1, prefix);
    else n += q + 1;  // causal, alibi_causal, softcap_causal
  }
  return n;
}

}  // namespace

TEST(BenchPeers, CasesAreTheDriversCases) {
  std::set<std::string> names;
  for (const PeerCase& c : peer_cases(2048)) names.insert(c.name);
  EXPECT_EQ(names, (std::set<std::string>{"full", "causal", "sliding1024", "document", "prefixlm", "alibi_causal",
                                          "softcap_causal", "relbias_full"}));
}

TEST(BenchPeers, AttendedEntriesMatchClosedForms) {
  // 1100: a tail tile (1100 % 128 = 76), a window shorter than S, documents not a block multiple.
  constexpr int64_t S = 1100;
  for (const PeerCase& c : peer_cases(S)) {
    ProblemConfig config;
    config.B = 2, config.H = 3, config.Q = S, config.D = 16;
    config.mask_spec = c.mask, config.mask_expr = c.mask_expr, config.score_spec = c.score;
    config.make_inputs = false;
    const Problem p = make_problem(config);
    const bool masked = !p.variant.mask_mod.empty();
    EXPECT_EQ(masked, c.name != "full" && c.name != "relbias_full") << c.name;
    const BlockMask bm = make_block_mask(p, 128);
    const double got = attended_entries(p, masked ? &bm : nullptr);
    EXPECT_DOUBLE_EQ(got, 6 * closed_form(c.name, S)) << c.name;
  }
}
