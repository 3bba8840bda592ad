// `flexattn run` end to end: every library mod and text mods pass --check on the cpu backend, forward
// and backward, in every input dtype; --save writes readable files that --load reproduces.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "cli_test_util.h"
#include "flexattn/npy.h"

using namespace flexattn;
using flexattn::test::CliResult;
using flexattn::test::contains;
using flexattn::test::run_cli;
using flexattn::test::TempDir;

namespace {

// Small odd shapes: Q != KV, lengths not multiples of the block, several blocks per row.
const std::vector<std::string> kShape = {"--backend", "cpu", "-B", "2", "-H", "4", "--hkv", "2",
                                         "-Q", "40", "--kv", "33", "-D", "16", "--dv", "8", "--block", "16"};

// One spelling per registry entry (EveryRegistryModIsCovered keeps this complete).
const std::map<std::string, std::vector<std::string>> kLibraryMods = {
    {"full", {"--mask", "full"}},
    {"causal", {"--mask", "causal"}},
    {"sliding_window", {"--mask", "sliding_window:5"}},
    {"prefix_lm", {"--mask", "prefix_lm:12"}},
    {"document", {"--mask", "document:3"}},
    {"chunked", {"--mask", "chunked:7"}},
    {"dilated", {"--mask", "dilated:3"}},
    {"softcap", {"--score", "softcap:2.5", "--mask", "causal"}},
    {"softcap_approx", {"--score", "softcap_approx:2.5", "--mask", "causal"}},
    {"alibi", {"--score", "alibi"}},
    {"alibi_slopes", {"--score", "alibi_slopes", "--mask", "causal"}},
    {"relbias", {"--score", "relbias"}},
    {"t5", {"--score", "t5:16:32"}},
};

CliResult run_args(std::vector<std::string> extra) {
  std::vector<std::string> args = {"run"};
  args.insert(args.end(), kShape.begin(), kShape.end());
  args.insert(args.end(), extra.begin(), extra.end());
  return run_cli(args);
}

void expect_check_ok(const std::vector<std::string>& extra) {
  std::string joined;
  for (const auto& a : extra) joined += a + " ";
  const CliResult r = run_args(extra);
  EXPECT_EQ(r.rc, 0) << joined << "\n" << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "\ncheck: ok\n")) << joined << "\n" << r.out;
  EXPECT_EQ(r.err, "") << joined;
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST(CliRun, EveryRegistryModIsCovered) {
  const CliResult r = run_cli({"run", "--help"});
  ASSERT_EQ(r.rc, 0);
  const size_t list = r.out.find("mods (--mask / --score NAME[:ARGS]):\n");
  ASSERT_NE(list, std::string::npos) << r.out;
  std::set<std::string> listed;
  std::istringstream lines(r.out.substr(list));
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line)) {
    if (line.size() < 3 || line[2] == ' ') continue;
    listed.insert(line.substr(2, line.find_first_of(":[ ", 2) - 2));
  }
  std::set<std::string> covered;
  for (const auto& [name, args] : kLibraryMods) covered.insert(name);
  EXPECT_EQ(listed, covered);
}

TEST(CliRun, LibraryModsPassTheCheckForward) {
  for (const auto& [name, args] : kLibraryMods) expect_check_ok(with(args, {"--check"}));
}

TEST(CliRun, LibraryModsPassTheCheckBackward) {
  for (const auto& [name, args] : kLibraryMods) expect_check_ok(with(args, {"--check", "--backward", "--seed", "5"}));
}

TEST(CliRun, ScoreAndMaskTogetherAndNoMods) {
  expect_check_ok({"--mask", "document:2", "--score", "relbias", "--check", "--backward"});
  expect_check_ok({"--check", "--backward"});
}

TEST(CliRun, TextModsWithBuffersAndScalars) {
  TempDir dir;
  HostTensor w(DType::F32, {4});
  for (int i = 0; i < 4; ++i) w.set(i, 0.25 * i - 0.3);
  npy::write(dir / "w.npy", w);
  HostTensor keep(DType::Bool, {40});
  for (int i = 0; i < 40; ++i) keep.set(i, i % 7 != 3);
  npy::write(dir / "keep.npy", keep);
  const std::vector<std::string> mods = {
      "--mask-expr", "q_idx >= kv_idx - shift && keep[kv_idx]",
      "--score-expr", "score * sigmoid(score) + w[h] * (q_idx - kv_idx) / S + c",
      "--buffer", "w=" + (dir / "w.npy"), "--buffer", "keep=" + (dir / "keep.npy"),
      "--scalar", "shift=2", "--scalar", "S:f32=33", "--scalar", "c=-0.5"};
  expect_check_ok(with(mods, {"--check"}));
  const CliResult r = run_args(with(mods, {"--check", "--backward"}));
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "\n  dw ")) << "the float buffer of the score_mod gets a checked gradient\n" << r.out;
  EXPECT_FALSE(contains(r.out, "\n  dkeep ")) << r.out;
  EXPECT_TRUE(contains(r.out, "\ncheck: ok\n")) << r.out;
}

TEST(CliRun, LowPrecisionInputs) {
  for (const char* dtype : {"f16", "bf16"})
    expect_check_ok({"--mask", "sliding_window:9", "--score", "softcap:4", "--dtype", dtype, "--check", "--backward"});
}

TEST(CliRun, SeedsAreDeterministic) {
  auto out_line = [](const CliResult& r) {
    const size_t a = r.out.find("\nout ");
    return r.out.substr(a, r.out.find('\n', a + 1) - a);
  };
  const CliResult a = run_args({"--mask", "causal", "--seed", "9"}), b = run_args({"--mask", "causal", "--seed", "9"}),
                  c = run_args({"--mask", "causal", "--seed", "10"});
  ASSERT_EQ(a.rc, 0);
  EXPECT_EQ(out_line(a), out_line(b));
  EXPECT_NE(out_line(a), out_line(c));
}

TEST(CliRun, SaveWritesReadableFilesAndLoadReproducesThem) {
  TempDir dir;
  const std::string first = dir / "first", second = dir / "second";
  CliResult r = run_args({"--mask", "causal", "--score", "relbias", "--backward", "--dtype", "bf16", "--save", first});
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::map<std::string, std::vector<int64_t>> want = {
      {"q", {2, 4, 40, 16}},  {"k", {2, 2, 33, 16}},  {"v", {2, 2, 33, 8}},   {"out", {2, 4, 40, 8}},
      {"lse", {2, 4, 40}},    {"dout", {2, 4, 40, 8}}, {"dq", {2, 4, 40, 16}}, {"dk", {2, 2, 33, 16}},
      {"dv", {2, 2, 33, 8}},  {"buffer_bias", {4, 72}}, {"dbuffer_bias", {4, 72}}};
  for (const auto& [name, shape] : want) {
    const HostTensor t = npy::read(first + "/" + name + ".npy");
    EXPECT_EQ(t.shape, shape) << name;
    EXPECT_EQ(t.dtype, DType::F32) << name << ": bf16 and lse / buffer grads are written as float32";
  }
  // --load reads the saved inputs (and dout, bias) back and reproduces the outputs bit for bit.
  r = run_cli({"run", "--backend", "cpu", "--mask", "causal", "--score", "relbias", "--backward", "--dtype", "bf16",
               "--block", "16", "--load", first, "--save", second});
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* name : {"q", "out", "lse", "dq", "dk", "dv", "dbuffer_bias"})
    EXPECT_EQ(npy::read(first + "/" + name + ".npy").bytes, npy::read(second + "/" + name + ".npy").bytes) << name;
  if (std::system("python3 -c 'import numpy' >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 with numpy not found";
  const std::string py = "python3 -c \"import numpy as np; d = '" + first +
                         "'; o = np.load(d + '/out.npy'); assert o.shape == (2, 4, 40, 8) and np.isfinite(o).all(); "
                         "l = np.load(d + '/lse.npy'); assert l.dtype == np.float32; "
                         "g = np.load(d + '/dbuffer_bias.npy'); assert np.abs(g).sum() > 0\"";
  EXPECT_EQ(std::system(py.c_str()), 0);
}

TEST(CliRun, RelbiasConstHasNoBufferGradient) {
  // --score relbias:const: the same run without d bias (the baseline for the learnable bias's cost).
  const CliResult learn = run_args({"--score", "relbias", "--backward"});
  const CliResult frozen = run_args({"--score", "relbias:const", "--backward"});
  ASSERT_EQ(learn.rc, 0) << learn.err;
  ASSERT_EQ(frozen.rc, 0) << frozen.err;
  EXPECT_NE(learn.out.find("\ndbias "), std::string::npos) << learn.out;
  EXPECT_EQ(frozen.out.find("\ndbias "), std::string::npos) << frozen.out;
  auto line = [](const CliResult& r, const std::string& name) {
    const size_t a = r.out.find("\n" + name + " ");
    return a == std::string::npos ? std::string() : r.out.substr(a, r.out.find('\n', a + 1) - a);
  };
  for (const char* name : {"out", "dq", "dk", "dv"}) EXPECT_EQ(line(learn, name), line(frozen, name)) << name;
}

TEST(CliRun, HelpInfoCacheAndBench) {
  for (const char* cmd : {"run", "mask", "bench", "cache", "info"}) {
    const CliResult r = run_cli({cmd, "--help"});
    EXPECT_EQ(r.rc, 0) << cmd;
    EXPECT_TRUE(contains(r.out, "usage: flexattn")) << cmd;
  }
  EXPECT_EQ(run_cli({"--help"}).rc, 0);
  EXPECT_TRUE(contains(run_cli({"run", "--help"}).out, "finite differences"));
  TempDir cache;
  ::setenv("FLEXATTN_CACHE_DIR", cache.path.c_str(), 1);
  CliResult r = run_cli({"cache", "list"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "(0 entries)")) << r.out;
  r = run_cli({"cache", "clear"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "removed 0 entries")) << r.out;
  ::setenv("FLEXATTN_CACHE_DIR", (cache.path / "missing").c_str(), 1);  // said "(0 entries)" with no hint
  r = run_cli({"cache", "list"});
  EXPECT_TRUE(contains(r.out, "/missing, which does not exist yet (0 entries)")) << r.out;
  ::setenv("FLEXATTN_CACHE_DIR", cache.path.c_str(), 1);
  r = run_cli({"info"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "mod library:")) << r.out;
  EXPECT_TRUE(contains(r.out, "sliding_window:W")) << r.out;
  ::unsetenv("FLEXATTN_CACHE_DIR");
}

TEST(CliRun, BenchQuickSuite) {
  const CliResult r = run_cli({"bench", "--suite", "quick", "--backend", "cpu"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  for (const char* v : {"causal ", "sliding_window ", "document ", "prefix_lm ", "softcap+causal ", "alibi+causal ",
                        "relbias ", "t5 ", "text mod "})
    EXPECT_TRUE(contains(r.out, std::string("\n") + v)) << v << "\n" << r.out;
  EXPECT_TRUE(contains(r.out, "all variants ok")) << r.out;
}
