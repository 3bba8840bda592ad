// The checks behind `flexattn run --check` must be able to fail: a perturbed output or gradient is
// reported, a correct one is not.
#include <gtest/gtest.h>

#include <cmath>

#include "check.h"
#include "flexattn/cpu_variant.h"
#include "flexattn/ir_text.h"
#include "flexattn/reference.h"
#include "execute.h"
#include "problem.h"

using namespace flexattn;
using namespace flexattn::cli;

namespace {

Problem small_problem(const std::string& mask, const std::string& score) {
  ProblemConfig c;
  c.B = 1, c.H = 2, c.Q = 24, c.KV = 20, c.D = 8;
  c.mask_spec = mask, c.score_spec = score;
  c.backward = true;
  c.seed = 1;
  return make_problem(c);
}

}  // namespace

TEST(Check, CompareMeasuresMaxAbsAndNormwiseRelativeError) {
  HostTensor a(DType::F64, {4}), b(DType::F64, {4});
  for (int i = 0; i < 4; ++i) a.set(i, i), b.set(i, i);
  EXPECT_EQ(compare("x", a, b, 1e-9).max_abs, 0);
  a.set(1, 1.5);
  const Discrepancy d = compare("x", a, b, 1e-9);
  EXPECT_DOUBLE_EQ(d.max_abs, 0.5);
  EXPECT_DOUBLE_EQ(d.rel, 0.5 / 3);
  EXPECT_FALSE(d.ok());
  a.set(1, 1), a.set(0, -INFINITY), b.set(0, -INFINITY);
  EXPECT_TRUE(compare("x", a, b, 0).ok()) << "matching infinities (fully masked rows) are equal";
  a.set(0, NAN);
  EXPECT_FALSE(compare("x", a, b, 1e9).ok()) << "NaN where the reference has -inf";
}

// A reference that cancels to ~0 (dq with a single key) is measured against the floor, not its own maximum.
TEST(Check, CompareScaleFloorBoundsTheDenominator) {
  HostTensor got(DType::F64, {2}), want(DType::F64, {2});
  want.set(0, 1e-300), want.set(1, 0), got.set(0, 1e-6), got.set(1, -1e-6);
  EXPECT_FALSE(compare("dq", got, want, 2e-2).ok()) << "relative to 1e-300 the noise is huge";
  const Discrepancy d = compare("dq", got, want, 2e-2, 4.0 / 256);
  EXPECT_DOUBLE_EQ(d.rel, 1e-6 / (4.0 / 256));
  EXPECT_TRUE(d.ok());
  want.set(0, 3.0), got.set(0, 3.0 + 0.3);  // above the floor the reference's own maximum counts
  EXPECT_DOUBLE_EQ(compare("dq", got, want, 2e-2, 4.0 / 256).rel, 0.3 / 3.0);
}

TEST(Check, ReferenceMatchesDenseAndAPerturbedOutputFails) {
  const Problem p = small_problem("sliding_window:5", "softcap:3");
  Execution e = execute(p, "cpu", 8, true);
  CheckReport r = check_execution(p, e, true);
  ASSERT_TRUE(r.ok());
  for (const Discrepancy& d : r.forward) EXPECT_LT(d.rel, 1e-12) << d.name;
  e.out.set(17, e.out.get(17) + 1e-6);
  r = check_execution(p, e, false);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.forward[0].name, "out");
  EXPECT_FALSE(r.forward[0].ok());
}

TEST(Check, GradientsMatchFiniteDifferencesAndAWrongGradientFails) {
  const Problem p = small_problem("causal", "relbias");
  ASSERT_EQ(p.variant.grad_buffers, std::vector<std::string>{"bias"});
  const Execution e = execute(p, "cpu", 8, true);
  // Every entry is checked (entries >= numel), so a single wrong entry anywhere must be found.
  const int all = 1 << 20;
  auto grads = check_gradients(p, e.dq, e.dk, e.dv, e.dbuffers, all, 1e-6);
  ASSERT_EQ(grads.size(), 4u);
  for (const Discrepancy& d : grads) EXPECT_TRUE(d.ok()) << format(d);
  for (const std::string which : {"dq", "dk", "dv", "dbias"}) {
    HostTensor dq = e.dq, dk = e.dk, dv = e.dv;
    auto db = e.dbuffers;
    HostTensor* t = which == "dq" ? &dq : which == "dk" ? &dk : which == "dv" ? &dv : &db.at("bias");
    t->set(t->numel() / 3, t->get(t->numel() / 3) + 1e-3);
    grads = check_gradients(p, dq, dk, dv, db, all, 1e-6);
    for (const Discrepancy& d : grads) EXPECT_EQ(d.ok(), d.name != which) << which << ": " << format(d);
  }
}

TEST(Check, ScalarArgTypes) {
  EXPECT_EQ(parse_scalar_arg("S=128").type, DType::I32);
  EXPECT_EQ(parse_scalar_arg("c=0.5").type, DType::F32);
  EXPECT_EQ(parse_scalar_arg("c:f32=3").type, DType::F32);
  EXPECT_EQ(parse_scalar_arg("n:i64=-4").value, -4);
  EXPECT_EQ(parse_scalar_arg("on:bool=true").value, 1);
  EXPECT_EQ(parse_scalar_arg("big=3000000000").type, DType::I64);  // as the Python tracer types a captured int
  EXPECT_EQ(parse_scalar_arg("big=3000000000").value, 3000000000.0);
  EXPECT_EQ(parse_scalar_arg("n:i64=-9007199254740992").value, -9007199254740992.0);
}

TEST(Check, NaiveBaselineErrorGrowsAsPrecisionDrops) {
  ProblemConfig c;
  c.B = 1, c.H = 2, c.Q = 64, c.D = 32, c.mask_spec = "causal", c.seed = 2;
  c.dtype = DType::BF16;  // inputs exactly representable in every precision below
  const Problem p = make_problem(c);
  HostTensor exact_out, exact_lse;
  dense_forward(p, &exact_out, &exact_lse);
  double prev = 0;
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    HostTensor out, lse;
    dense_forward(p, &out, &lse, t);
    const double rel = compare("out", out, exact_out, 0).rel;
    EXPECT_GT(rel, prev) << dtype_name(t);
    prev = rel;
  }
  EXPECT_LT(prev, 3e-2);
  EXPECT_GT(prev, 1e-3) << "bf16 rounding of P and out must show";
}

TEST(Check, BackendComparisonAcceptsDtypeRoundingAndRejectsMore) {
  ProblemConfig c;
  c.B = 1, c.H = 2, c.Q = 48, c.D = 16, c.mask_spec = "sliding_window:20", c.score_spec = "alibi_slopes";
  c.dtype = DType::BF16, c.backward = true, c.seed = 4;
  const Problem p = make_problem(c);
  // A pretend backend: the exact reference rounded to bf16 (what a perfect bf16 kernel returns).
  Execution e = execute(p, "cpu", 16, true);
  e.backend = "cuda";
  for (HostTensor* t : {&e.out, &e.dq, &e.dk, &e.dv, &e.dbuffers.at("slopes")})
    for (int64_t i = 0; i < t->numel(); ++i) t->set(i, double(bf16_to_float(float_to_bf16(float(t->get(i))))));
  CheckReport r = check_execution(p, e, true);
  EXPECT_TRUE(r.ok());
  ASSERT_EQ(r.backward.size(), 4u);
  EXPECT_EQ(r.backward[3].name, "dslopes");
  e.dk.set(5, e.dk.get(5) + 0.5);
  r = check_execution(p, e, true);
  EXPECT_FALSE(r.ok());
  for (const Discrepancy& d : r.backward) EXPECT_EQ(d.ok(), d.name != "dk") << format(d);
  e.out.set(3, e.out.get(3) * 1.2 + 0.1);
  EXPECT_FALSE(check_execution(p, e, false).forward[0].ok());
}

// ALiBi slopes' gradient sums dS (kv - q) over every entry with heavy cancellation (Σ_j dS_ij = 0), so a
// bf16 forward's O, which every bf16 backward reads for Δ, alone moves it by ~1e-2 of its size at issue 3's
// library-check shape (measured: 2.4e-2; the sm90 kernels on the H200: 2.06e-2). The tolerance follows that
// baseline; an error well beyond it still fails.
TEST(Check, GradientToleranceFollowsTheLowPrecisionOutputBaseline) {
  ProblemConfig c;
  c.B = 2, c.H = 4, c.Hkv = 2, c.Q = 257, c.KV = 300, c.D = 128, c.score_spec = "alibi_slopes";
  c.dtype = DType::BF16, c.backward = true, c.seed = 0;
  const Problem p = make_problem(c);
  const Execution exact = execute(p, "cpu", 128, true);
  // The baseline as a pretend backend: exact math except that Δ reads the naive bf16 forward's O.
  HostTensor out_bf16, lse_bf16;
  dense_forward(p, &out_bf16, &lse_bf16, DType::BF16);
  const ModBindings bindings = p.bindings();
  cpu::VariantFns fns(p.variant, bindings, 1);
  cpu::Options opt;
  opt.threads = 1;
  opt.delta_out = &out_bf16;
  const cpu::BackwardResult b = cpu::backward(p.q, p.k, p.v, p.dout, nullptr, fns.fns(), opt);
  Execution e = exact;
  e.backend = "cuda";
  e.dq = b.dq, e.dk = b.dk, e.dv = b.dv;
  e.dbuffers = fns.buffer_grads();
  const HostTensor& want = exact.dbuffers.at("slopes");
  const double base_rel = compare("", e.dbuffers.at("slopes"), want, 0).rel;
  EXPECT_GT(base_rel, 5e-3) << "the bf16 O must move dslopes visibly at this shape";
  EXPECT_LT(base_rel, 5e-2);
  CheckReport r = check_execution(p, e, true);
  EXPECT_TRUE(r.ok());
  ASSERT_EQ(r.backward.back().name, "dslopes");
  EXPECT_NEAR(r.backward.back().tol, std::max(2e-2, 4 * base_rel), 1e-9);
  EXPECT_GT(r.backward.back().tol, 2e-2);
  EXPECT_DOUBLE_EQ(r.backward[0].tol, 2e-2) << "dq's baseline error is far below the dtype bound";
  // One slope off by twice the tolerance: reported, and only there.
  double m = 0;
  for (int64_t i = 0; i < want.numel(); ++i) m = std::max(m, std::abs(want.get(i)));
  e.dbuffers.at("slopes").set(1, want.get(1) + 2 * r.backward.back().tol * m);
  r = check_execution(p, e, true);
  EXPECT_FALSE(r.backward.back().ok());
  for (size_t i = 0; i + 1 < r.backward.size(); ++i) EXPECT_TRUE(r.backward[i].ok()) << r.backward[i].name;
}

// A mod that asks for tanh_approx is checked against a naive baseline that carries the approximation's own error
// (tanh * (1 - 2^-11)): the rewrite touches only those nodes, the report says so, and a pretend backend whose
// tanh is off by 2^-11 the other way passes.
TEST(Check, ApproximateTanhIsMeasuredAgainstABaselineWithItsError) {
  ProblemConfig c;
  c.B = 1, c.H = 2, c.Q = 48, c.D = 16, c.mask_spec = "causal", c.score_spec = "softcap:2.5";
  c.dtype = DType::BF16, c.backward = true, c.seed = 3;
  const Problem exact = make_problem(c);
  EXPECT_FALSE(with_approximation_error(exact.variant).has_value());  // no tanh_approx: the problem as it is
  c.score_spec = "softcap_approx:2.5";
  const Problem p = make_problem(c);
  const std::optional<Variant> off = with_approximation_error(p.variant);
  ASSERT_TRUE(off.has_value());
  EXPECT_EQ(ir::print(off->score_mod), "2.5 * (tanh(score / 2.5) * 0.99951171875)");
  EXPECT_TRUE(off->mask_mod.same(p.variant.mask_mod));
  // The pretend backend: the exact reference of the mod with tanh * (1 + 2^-11), rounded to bf16.
  Problem other = p;
  other.variant.score_mod = ir::parse("2.5 * (tanh(score / 2.5) * 1.00048828125)");
  Execution e = execute(other, "cpu", 16, true);
  e.backend = "cuda";
  for (HostTensor* t : {&e.out, &e.dq, &e.dk, &e.dv})
    for (int64_t i = 0; i < t->numel(); ++i) t->set(i, double(bf16_to_float(float_to_bf16(float(t->get(i))))));
  const CheckReport r = check_execution(p, e, true);
  EXPECT_TRUE(r.ok());
  EXPECT_NE(r.forward_what.find("with tanh_approx off by its 2^-11"), std::string::npos) << r.forward_what;
  EXPECT_EQ(check_execution(exact, e, false).forward_what.find("tanh_approx"), std::string::npos);
}

TEST(Check, ReferenceBackwardRejectsAMisshapenDeltaOutput) {
  const Problem p = small_problem("causal", "");
  HostTensor wrong(DType::F64, {1, 2, 24, 7});
  const ModBindings bindings = p.bindings();
  cpu::VariantFns fns(p.variant, bindings, 1);
  cpu::Options opt;
  opt.delta_out = &wrong;
  try {
    cpu::backward(p.q, p.k, p.v, p.dout, nullptr, fns.fns(), opt);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("options.delta_out"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("[B, Hq, L, Dv]"), std::string::npos) << err.what();
  }
}

// make_block_mask through a kv-range mask's row bounds gives the block mask the interpreter gives, entry for entry,
// at lengths that are not multiples of the block, q != kv, and masks that read b, h or a scalar; a mask that is not a
// range (document ids) takes the interpreter either way.
TEST(BlockMaskBuild, KvRangeBoundsMatchTheInterpreter) {
  struct Case {
    std::string spec, expr;
    int64_t Q, KV;
    int block;
  };
  const std::vector<Case> cases = {
      {"causal", "", 300, 700, 64},
      {"sliding_window:100", "", 700, 300, 64},
      {"prefix_lm:70", "", 513, 513, 128},
      {"", "kv_idx - q_idx <= 5 && q_idx - kv_idx <= 40", 257, 129, 64},
      {"", "where(h > 1, q_idx >= kv_idx, kv_idx < 90) || b == 1", 200, 260, 64},
      {"", "!(kv_idx > q_idx + 3) && kv_idx >= q_idx - 200", 1000, 1000, 128},
      {"", "kv_idx <= q_idx // 3 + h && kv_idx > q_idx // 5 - 7", 777, 500, 64},  // bounds read q_idx per row
      {"document:3", "", 300, 300, 64},
  };
  for (const Case& c : cases) {
    ProblemConfig cfg;
    cfg.B = 2, cfg.H = 3, cfg.Q = c.Q, cfg.KV = c.KV, cfg.D = 8;
    cfg.mask_spec = c.spec, cfg.mask_expr = c.expr;
    cfg.make_inputs = false;
    const Problem p = make_problem(cfg);
    const std::string what = c.spec + c.expr;
    const BlockMask fast = make_block_mask(p, c.block), slow = make_block_mask(p, c.block, false);
    EXPECT_EQ(fast.B, slow.B) << what;
    EXPECT_EQ(fast.H, slow.H) << what;
    EXPECT_EQ(fast.kv_num_blocks, slow.kv_num_blocks) << what;
    EXPECT_EQ(fast.kv_indices, slow.kv_indices) << what;
    EXPECT_EQ(fast.full_kv_num_blocks, slow.full_kv_num_blocks) << what;
    EXPECT_EQ(fast.full_kv_indices, slow.full_kv_indices) << what;
    EXPECT_EQ(fast.q_num_blocks, slow.q_num_blocks) << what;
    EXPECT_EQ(fast.full_q_indices, slow.full_q_indices) << what;
    // Not vacuous: the mask has partial and full blocks (or, for the band, partial ones at least).
    int64_t partial = 0;
    for (int32_t n : fast.kv_num_blocks) partial += n;
    EXPECT_GT(partial, 0) << what;
  }
}
