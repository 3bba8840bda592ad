// Every kind of bad input ends with exactly one line "flexattn: error: ..." on stderr and exit code 2.
#include <gtest/gtest.h>

#include <algorithm>

#include "cli_test_util.h"
#include "flexattn/npy.h"

using namespace flexattn;
using flexattn::test::CliResult;
using flexattn::test::run_cli;
using flexattn::test::TempDir;

namespace {

// The error line without its prefix; fails the test unless the output has the promised form.
std::string error_line(const std::vector<std::string>& args) {
  const CliResult r = run_cli(args);
  std::string joined;
  for (const auto& a : args) joined += a + " ";
  EXPECT_EQ(r.rc, 2) << joined << "\nstdout: " << r.out << "\nstderr: " << r.err;
  const std::string prefix = "flexattn: error: ";
  EXPECT_EQ(r.err.rfind(prefix, 0), 0u) << joined << "\nstderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << joined << "\nstderr: " << r.err;
  if (r.err.size() < prefix.size() + 1) return "";
  return r.err.substr(prefix.size(), r.err.size() - prefix.size() - 1);
}

HostTensor filled(DType t, std::vector<int64_t> shape) {
  HostTensor r(t, std::move(shape));
  for (int64_t i = 0; i < r.numel(); ++i) r.set(i, double(i % 5));
  return r;
}

}  // namespace

TEST(CliErrors, CommandsAndFlags) {
  EXPECT_EQ(error_line({}), "missing command; expected one of info, run, mask, bench, cache (see flexattn --help)");
  EXPECT_EQ(error_line({"frobnicate"}), "unknown command 'frobnicate'; expected one of info, run, mask, bench, cache");
  EXPECT_EQ(error_line({"run", "--bogus"}), "unknown flag '--bogus' for 'run' (see flexattn run --help)");
  EXPECT_EQ(error_line({"run", "--mask"}), "--mask: missing value NAME[:ARGS]");
  EXPECT_EQ(error_line({"run", "-Q", "4", "-Q", "8"}), "-Q given more than once");
  EXPECT_EQ(error_line({"run", "extra"}), "unexpected argument 'extra' for 'run'");
  EXPECT_EQ(error_line({"run", "--backward=1"}), "--backward takes no value");
  EXPECT_EQ(error_line({"mask", "--score", "softcap:3"}), "unknown flag '--score' for 'mask' (see flexattn mask --help)");
  EXPECT_EQ(error_line({"info", "--verbose"}), "unknown flag '--verbose' for 'info' (see flexattn info --help)");
}

TEST(CliErrors, NumbersAndShapes) {
  EXPECT_EQ(error_line({"run", "-Q", "0"}), "-Q: expected an integer in [1, 2147483648], got 0");
  EXPECT_EQ(error_line({"run", "-Q", "12abc"}), "-Q: expected an integer, got '12abc'");
  EXPECT_EQ(error_line({"run", "-D", ""}), "-D: expected an integer, got ''");
  EXPECT_EQ(error_line({"run", "--seed", "-1"}), "--seed: expected a non-negative integer, got '-1'");
  EXPECT_EQ(error_line({"run", "--block", "0"}), "--block: expected an integer in [1, 1048576], got 0");
  EXPECT_EQ(error_line({"run", "-H", "6", "--hkv", "4"}), "GQA: -H 6 must be a multiple of --hkv 4");
  EXPECT_EQ(error_line({"run", "-H", "100000", "-Q", "100000"}),
            "shape too large: q/k/v may hold at most 2^31 elements each");
  EXPECT_EQ(error_line({"run", "--dtype", "f64"}), "--dtype: dtype 'f64' is not supported here, expected one of f32, f16, bf16");
  EXPECT_EQ(error_line({"run", "--dtype", "f8"}), "--dtype: unknown dtype 'f8', expected one of f32, f16, bf16");
  EXPECT_EQ(error_line({"run", "--backend", "tpu"}), "--backend: expected cpu, cuda or auto, got 'tpu'");
}

TEST(CliErrors, Mods) {
  const std::string unknown = error_line({"run", "--mask", "nope"});
  EXPECT_EQ(unknown.rfind("--mask: unknown mod 'nope'; known mods: full, causal, sliding_window:W,", 0), 0u) << unknown;
  EXPECT_EQ(error_line({"run", "--mask", "sliding_window:x"}),
            "--mask: mod 'sliding_window:x': W (window) must be an integer, got 'x'");
  EXPECT_EQ(error_line({"run", "--mask", "softcap:30"}), "--mask: 'softcap:30' is a score mod, expected a mask mod");
  EXPECT_EQ(error_line({"run", "--score", "causal"}), "--score: 'causal' is a mask mod, expected a score mod");
  EXPECT_EQ(error_line({"run", "--mask", "causal", "--mask-expr", "q_idx >= kv_idx"}), "give --mask or --mask-expr, not both");
  EXPECT_EQ(error_line({"run", "--score", "alibi", "--score-expr", "score"}), "give --score or --score-expr, not both");
  EXPECT_EQ(error_line({"run", "--mask-expr", ""}), "--mask-expr: empty expression");
  const std::string parse = error_line({"run", "--mask-expr", "q_idx >= "});
  EXPECT_EQ(parse.rfind("--mask-expr: line 1, column 10: expected", 0), 0u) << parse;
  const std::string parse2 = error_line({"run", "--score-expr", "score *\n (h + "});
  EXPECT_EQ(parse2.rfind("--score-expr: line 2, column", 0), 0u) << parse2;
  EXPECT_EQ(error_line({"run", "--mask-expr", "q_idx - kv_idx"}), "--mask-expr: a mask_mod must return bool, this one returns i32");
  EXPECT_EQ(error_line({"run", "--mask-expr", "score > 0"}), "--mask-expr: a mask_mod cannot read score");
  EXPECT_EQ(error_line({"run", "--score-expr", "q_idx > kv_idx"}), "--score-expr: a score_mod must return a number, this one returns bool");
}

TEST(CliErrors, ScalarsAndBuffers) {
  TempDir dir;
  EXPECT_EQ(error_line({"run", "--score-expr", "score * c"}),
            "scalar 'c' is read by the mods but not given (use --scalar c=VALUE)");
  EXPECT_EQ(error_line({"run", "--scalar", "x=1"}), "--scalar x: the mods do not read a scalar named 'x'");
  // A library mod's scalar has its own type: another one given was converted silently (alibi's H:f32=4.9 ran as 4)
  EXPECT_EQ(error_line({"run", "--score", "alibi", "--scalar", "H:f32=4.9"}),
            "--scalar H: the mods read H as i32, got f32 4.9 (give --scalar H:i32=VALUE)");
  EXPECT_EQ(error_line({"run", "--score", "alibi", "--scalar", "H=4.9"}),
            "--scalar H: the mods read H as i32, got f32 4.9 (give --scalar H:i32=VALUE)");
  EXPECT_EQ(error_line({"run", "--score", "alibi", "--scalar", "H:bool=true"}),
            "--scalar H: the mods read H as i32, got bool 1 (give --scalar H:i32=VALUE)");
  for (const char* h : {"H=4", "H=4.0", "H:i32=4"}) {  // an inferred value that the type holds exactly
    const CliResult exact = run_cli({"run", "--score", "alibi", "--scalar", h, "--backend", "cpu"});
    EXPECT_EQ(exact.rc, 0) << h << exact.err;
  }
  // two mods reading H as i64 and i32: a written i64 fits one of them only (it was checked against the last seen)
  EXPECT_EQ(error_line({"run", "--mask-expr", "q_idx - kv_idx < H", "--score", "alibi", "--scalar", "H:i64=4"}),
            "--scalar H: the mods read H as i32, got i64 4 (give --scalar H:i32=VALUE)");
  // "+-1" ran as -1 (a leading '+' was skipped, then the number read with its '-')
  EXPECT_EQ(error_line({"run", "--score-expr", "score * c", "--scalar", "c=+-1"}),
            "--scalar c=+-1: expected a finite number, got '+-1'");
  EXPECT_EQ(error_line({"run", "--score-expr", "score * c", "--scalar", "c"}), "--scalar: expected NAME=VALUE, got 'c'");
  EXPECT_EQ(error_line({"run", "--score-expr", "score * c", "--scalar", "c=abc"}),
            "--scalar c=abc: expected a finite number, got 'abc'");
  EXPECT_EQ(error_line({"run", "--score-expr", "score * f32(c)", "--scalar", "c:i32=3000000000"}),
            "--scalar c:i32=3000000000: out of range for i32 ([-2^31, 2^31))");
  EXPECT_EQ(error_line({"run", "--score-expr", "score * f32(c)", "--scalar", "c=9007199254740993"}),
            "--scalar c=9007199254740993: out of range for i64 (|value| <= 2^53, exact in the double it travels as)");
  EXPECT_EQ(error_line({"run", "--score-expr", "score * f32(c)", "--scalar", "c:bool=2"}),
            "--scalar c:bool=2: expected true or false, got '2'");
  EXPECT_EQ(error_line({"run", "-B", "2147483648", "-H", "2147483648", "-Q", "2147483648", "-D", "2147483648"}),
            "shape too large: q/k/v may hold at most 2^31 elements each");  // the product wrapped to 0 and ran
  EXPECT_EQ(error_line({"mask", "--mask", "causal", "-B", "2147483648", "-H", "2147483648", "-Q", "2147483648"}),
            "shape too large: B x H x Q (and B x Hkv x KV) may be at most 2^31 rows");  // hung
  EXPECT_EQ(error_line({"run", "--score-expr", "score * c", "--scalar", "c:u8=1"}),
            "--scalar c:u8=1: type must be f32, i32, i64 or bool, got 'u8'");
  EXPECT_EQ(error_line({"run", "--score-expr", "score + bias[h]"}),
            "buffer 'bias' is read by the mods but not given (use --buffer bias=FILE.npy)");
  EXPECT_EQ(error_line({"run", "--score-expr", "score + bias[h]", "--buffer", "bias=/nonexistent/b.npy"}),
            "/nonexistent/b.npy: cannot open for reading: No such file or directory");
  std::ofstream(dir / "text.npy") << "not numpy";
  EXPECT_EQ(error_line({"run", "--score-expr", "score + bias[h]", "--buffer", "bias=" + (dir / "text.npy")}),
            dir / "text.npy" + ": not a .npy file (bad magic string)");
  npy::write(dir / "b2.npy", filled(DType::F32, {3, 4}));
  EXPECT_EQ(error_line({"run", "--score-expr", "score + bias[h]", "--buffer", "bias=" + (dir / "b2.npy")}),
            "--buffer bias=" + (dir / "b2.npy") + ": has shape [3, 4] but the mod indexes it with 1 indices");
  EXPECT_EQ(error_line({"run", "--buffer", "bias=" + (dir / "b2.npy")}),
            "--buffer bias=" + (dir / "b2.npy") + ": the mods do not read a buffer named 'bias'");
  EXPECT_EQ(error_line({"run", "--buffer", "bias"}), "--buffer: expected NAME=VALUE, got 'bias'");
  npy::write(dir / "f.npy", filled(DType::F32, {128}));
  EXPECT_EQ(error_line({"run", "--mask", "document:2", "--buffer", "doc_ids=" + (dir / "f.npy")}),
            "--buffer doc_ids=" + (dir / "f.npy") + ": holds f32 but the mod reads it as i32");
  EXPECT_EQ(error_line({"run", "--score-expr", "score + bias[h]", "--buffer", "bias=" + (dir / "f.npy"), "--buffer",
                        "bias=" + (dir / "f.npy")}),
            "--buffer bias: given more than once");
}

TEST(CliErrors, LoadAndSave) {
  TempDir dir;
  EXPECT_EQ(error_line({"run", "--load", "/nonexistent/dir"}), "--load /nonexistent/dir: not a directory");
  EXPECT_EQ(error_line({"run", "--load", dir.path.string()}), dir / "q.npy" + ": cannot open for reading: No such file or directory");
  npy::write(dir / "q.npy", filled(DType::F32, {2, 8, 16}));
  EXPECT_EQ(error_line({"run", "--load", dir.path.string()}), dir / "q.npy" + ": expected a 4-d array [B, H, L, D], got shape [2, 8, 16]");
  npy::write(dir / "q.npy", filled(DType::F32, {1, 2, 8, 16}));
  npy::write(dir / "k.npy", filled(DType::F32, {1, 2, 8, 16}));
  npy::write(dir / "v.npy", filled(DType::F32, {1, 2, 9, 16}));
  EXPECT_EQ(error_line({"run", "--load", dir.path.string()}),
            "--load: shapes do not fit together: q [1, 2, 8, 16], k [1, 2, 8, 16], v [1, 2, 9, 16] (need k [B|1, Hkv, KV, D], "
            "v [B|1, Hkv, KV, Dv])");
  npy::write(dir / "v.npy", filled(DType::F32, {1, 2, 8, 16}));
  EXPECT_EQ(error_line({"run", "--load", dir.path.string(), "-H", "4"}), "-H 4 disagrees with q.shape[1] = 2 of --load");
  std::ofstream(dir / "file") << "x";
  EXPECT_EQ(error_line({"run", "-Q", "8", "-D", "16", "--save", dir / "file"}).rfind("--save " + (dir / "file") + ": cannot create the directory", 0), 0u);
}

TEST(CliErrors, OtherCommands) {
  EXPECT_EQ(error_line({"mask"}), "mask: give --mask NAME[:ARGS] or --mask-expr TEXT");
  EXPECT_EQ(error_line({"mask", "--mask", "relbias"}), "--mask: 'relbias' is a score mod, expected a mask mod");
  EXPECT_EQ(error_line({"cache"}), "cache: missing action; expected list, clear or prewarm");
  EXPECT_EQ(error_line({"cache", "purge"}), "cache: unknown action 'purge'; expected list, clear or prewarm");
  EXPECT_EQ(error_line({"bench", "--suite", "slow"}), "--suite: unknown suite 'slow'; expected quick, short, short64, long, full or decode");
  // one suite's flags given to another were ignored without a word
  EXPECT_EQ(error_line({"bench", "--suite", "quick", "--batch", "3"}), "--batch applies to --suite decode only");
  EXPECT_EQ(error_line({"bench", "--shuffle"}), "--shuffle applies to --suite decode only");
  EXPECT_EQ(error_line({"bench", "--suite", "decode", "--backend", "cpu"}),
            "--backend cpu does not apply to --suite decode: it times the cuda decode kernels");
  EXPECT_EQ(error_line({"bench", "--suite", "decode", "--seed", "3"}), "--seed does not apply to --suite decode (fixed inputs)");
  EXPECT_EQ(error_line({"bench", "--suite", "full", "--backend", "cpu"}),
            "--suite full: runs on the cuda backend only (a cpu reference at these sizes takes minutes)");
  EXPECT_EQ(error_line({"bench", "--suite", "short", "--backend", "gpu"}),
            "--backend: expected cpu, cuda or auto, got 'gpu'");
  EXPECT_EQ(error_line({"bench", "--suite", "decode", "--splits", "0,8,500"}),
            "--splits: expected a comma-separated list of 0..128, got '0,8,500'");
  EXPECT_EQ(error_line({"bench", "--suite", "decode", "--splits", "4,"}),
            "--splits: expected a comma-separated list of 0..128, got '4,'");
  EXPECT_EQ(error_line({"cache", "list", "--arch", "sm_80"}), "--arch applies to 'cache prewarm' only");
  EXPECT_EQ(error_line({"run", "--deterministic"}), "--deterministic applies to the backward: give --backward too");
  // No GPU here ("cannot run here"), or one and f32 inputs ("takes bf16 or f16 inputs").
  EXPECT_EQ(error_line({"run", "--backend", "cuda"}).rfind("--backend cuda: the cuda backend ", 0), 0u);
}
