// Codegen rewrites of the generated functor: a float division by a value that is the same for every
// entry becomes a multiplication by its reciprocal (computed once by the compiler), one that varies per
// entry stays an IEEE division; i32 gather indices clamp in 32 bits with the row offset apart.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "common/mod_ops.cuh"
#include "flexattn/codegen.h"
#include "flexattn/expr.h"
#include "flexattn/ir_text.h"
#include "flexattn/mods.h"

using namespace flexattn;
using namespace flexattn::ir;

namespace {

// The score_mod function's body only (score_grad repeats the expressions).
std::string score_mod_source(const Expr& score_mod) {
  Variant v;
  v.score_mod = score_mod;
  const std::string s = codegen::emit_cuda_variant(v, false).source;
  const size_t a = s.find("static float score_mod("), b = s.find("static bool mask_mod(");
  EXPECT_TRUE(a != std::string::npos && b != std::string::npos) << s;
  return s.substr(a, b - a);
}

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// Distance in representable floats (same sign, finite).
int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::llabs(int64_t(ia) - int64_t(ib));
}

}  // namespace

TEST(EmitCuda, UniformDivisorsBecomeAReciprocalMultiply) {
  // softcap: score / cap with a literal cap, inside cap * tanh(...): one fused form, no temporaries.
  const std::string softcap = score_mod_source(mods::softcap(30));
  EXPECT_TRUE(has(softcap, "const float t0 = fa_mul_tanh(((float)p.lit[0]), score, fa_rcp(((float)p.lit[0])));\n"
                           "    return t0;")) << softcap;
  EXPECT_FALSE(has(softcap, " / ")) << softcap;
  EXPECT_TRUE(has(score_mod_source(score() / 7.0), "(score * fa_rcp(((float)p.lit[0])))"));
  // A runtime scalar, and an expression of a scalar and literals only.
  const Expr temp = scalar("T", DType::F32);
  EXPECT_TRUE(has(score_mod_source(score() / temp), "(score * fa_rcp(((float)p.scalar[0])))"));
  const std::string expr = score_mod_source(score() / (temp * 2.0 + 1.0));
  EXPECT_TRUE(has(expr, "* fa_rcp(")) << expr;
  EXPECT_FALSE(has(expr, " / ")) << expr;
  // The dividend may vary: alibi's (h + 1) * 8 / H divides by the scalar H.
  const std::string alibi = score_mod_source(mods::alibi("H"));
  EXPECT_TRUE(has(alibi, "* fa_rcp(((float)((int)p.scalar[0])))")) << alibi;
}

TEST(EmitCuda, DivisorsThatVaryPerEntryKeepIeeeDivision) {
  const Buffer scale{"scale", DType::F32};
  for (const Expr& divisor : {abs(score()) + 1.0, cast(q_idx(), DType::F32) + 1.0, cast(kv_idx() + 1, DType::F32),
                              cast(head(), DType::F32) + 1.0, cast(batch(), DType::F32) + 2.0, scale(head())}) {
    const std::string s = score_mod_source(score() / divisor);
    EXPECT_FALSE(has(s, "fa_rcp")) << s;
    EXPECT_TRUE(has(s, " / ")) << s;
  }
}

TEST(EmitCuda, ReciprocalMultiplyIsWithinTwoUlpOfTheInterpreter) {
  // x * fa_rcp(d) (the emitted form, here mod_ops.cuh built for the host) against the interpreter's
  // quotient in double, rounded to f32: two roundings of relative error 2^-24 each, so at most 2 ulp;
  // torch flex's div.full.f32 allows 2 ulp as well. Also counts how often it is not the IEEE quotient.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> ex(-30, 30);
  int64_t worst = 0, off = 0, n = 0;
  const Expr d = scalar("d", DType::F32);
  const Expr mod = score() / d;
  for (int i = 0; i < 200000; ++i) {
    const float x = std::ldexp(mant(rng), ex(rng)) * (i % 2 ? -1.f : 1.f);
    const float dv = i < 1000 ? float(1 + i % 64) : std::ldexp(mant(rng), ex(rng) / 2);
    EvalEnv env;
    env.score = x;
    env.scalar = [dv](const std::string&) { return double(dv); };
    const float want = float(eval(mod, env).f);
    const float got = x * fa_rcp(dv);
    worst = std::max(worst, ulps(got, want));
    off += got != x / dv;
    ++n;
  }
  EXPECT_LE(worst, 1);  // measured 1 (the bound above is 2)
  std::printf("x * rcp(d) vs x / d: worst %lld ulp, differs from IEEE in %lld of %lld\n", (long long)worst,
              (long long)off, (long long)n);
  // Powers of two (softcap's usual caps are not, 2 and 4 are t5's) give exactly the quotient.
  for (float p2 : {1.f, 2.f, 4.f, 8.f, 0.5f})
    for (float x : {1.f, 3.f, -7.25f, 1e-3f, 123456.7f}) EXPECT_EQ(x * fa_rcp(p2), x / p2);
}

TEST(EmitCuda, Int32GatherIndicesClampInThirtyTwoBits) {
  const Buffer bias{"bias", DType::F32};
  const std::string rel = score_mod_source(score() + bias(head(), q_idx() - kv_idx() + 7));
  // h (a position: never negative) takes the upper clamp only; q_idx - kv_idx + 7 the whole rule.
  EXPECT_TRUE(has(rel, "fa_read_f32(p.buf[0], ((long long)fa_clamp_position32(h, p.buf_shape[0][0])) * "
                       "p.buf_shape[0][1], fa_clamp_index32(")) << rel;
  EXPECT_FALSE(has(rel, "fa_clamp_index((long long)")) << rel;
  // A one-dimensional gather has no row.
  const std::string one = score_mod_source(score() + bias(kv_idx()));
  EXPECT_TRUE(has(one, "fa_read_f32(p.buf[0], 0LL, fa_clamp_position32(kv_idx, p.buf_shape[0][0]))")) << one;
  const std::string shifted = score_mod_source(score() + bias(kv_idx() - 1));
  EXPECT_TRUE(has(shifted, "fa_clamp_index32(")) << shifted;
  EXPECT_FALSE(has(shifted, "fa_clamp_position32(")) << shifted;
  // An i64 index keeps the 64-bit clamp and one flat offset.
  const std::string wide = score_mod_source(score() + bias(cast(q_idx(), DType::I64) * 3));
  EXPECT_TRUE(has(wide, "fa_read_f32(p.buf[0], fa_clamp_index((long long)")) << wide;
  EXPECT_FALSE(has(wide, "fa_clamp_index32")) << wide;
}

TEST(EmitCuda, TanhOfAUniformMultipleFoldsTheScale) {
  // tanh(x * k), tanh(x / k), u * tanh(...) with k, u uniform take the fused forms; tanh of anything
  // else, or a tanh times a per-entry value, the plain ones.
  const Expr T = scalar("T", DType::F32);
  EXPECT_TRUE(has(score_mod_source(tanh(score() * T)), "fa_tanh_scaled(score, ((float)p.scalar[0]))"));
  EXPECT_TRUE(has(score_mod_source(tanh(T * score())), "fa_tanh_scaled(score, ((float)p.scalar[0]))"));
  EXPECT_TRUE(has(score_mod_source(tanh(score() / T)), "fa_tanh_scaled(score, fa_rcp(((float)p.scalar[0])))"));
  EXPECT_TRUE(has(score_mod_source(T * tanh(score())), "fa_mul_tanh(((float)p.scalar[0]), score, 1.0f)"));
  const std::string q = score_mod_source(tanh(score() * cast(q_idx(), DType::F32)));
  EXPECT_TRUE(has(q, "fa_tanh(") && !has(q, "fa_tanh_scaled")) << q;
  const std::string qs = score_mod_source(cast(q_idx(), DType::F32) * tanh(score()));
  EXPECT_TRUE(has(qs, "fa_tanh(") && !has(qs, "fa_mul_tanh")) << qs;
}

TEST(EmitCuda, FusedTanhFormsMatchTheInterpreter) {
  // The host build of mod_ops.cuh has no ex2/rcp.approx: its fa_tanh_rcp is the same formula in exact
  // f32 (tests the algebra of the fused forms; the GPU check covers the approximate instructions).
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> s(-400.f, 400.f);
  const Expr cap = scalar("cap", DType::F32);
  const Expr mod = cap * tanh(score() / cap);
  for (float c : {5.f, 20.f, 30.f, 50.f})
    for (int i = 0; i < 20000; ++i) {
      const float x = i < 100 ? float(i - 50) * 0.01f : s(rng);
      EvalEnv env;
      env.score = x;
      env.scalar = [c](const std::string&) { return double(c); };
      const double want = eval(mod, env).f;
      ASSERT_NEAR(fa_mul_tanh(c, x, fa_rcp(c)), want, 2e-6 * c) << x << " cap " << c;
      ASSERT_NEAR(fa_tanh_scaled(x, fa_rcp(c)), std::tanh(double(x) / c), 2e-6) << x;
    }
}

// ALiBi's shape, score + c * (kv_idx - q_idx) with c free of the position, is recognised (kRelAffine,
// rel_slope = c) for the kernels that evaluate the bias per tile as an affine function of the column
// (fwd_softmax_sm90.cuh, FLEXATTN_SM90_AFFINE); any other shape keeps kRelAffine false.
TEST(EmitCuda, RelAffineScoreModsAreRecognised) {
  auto source = [](const Expr& score_mod) {
    Variant v;
    v.score_mod = score_mod;
    return codegen::emit_cuda_variant(v, false).source;
  };
  const Buffer slopes{"slopes", DType::F32};
  const std::string alibi = source(mods::alibi("H"));
  EXPECT_TRUE(has(alibi, "static constexpr bool kRelAffine = true;")) << alibi;
  EXPECT_TRUE(has(alibi, "exp2f(")) << alibi;  // the slope formula lives in rel_slope
  const std::string buf = source(mods::alibi(slopes));
  EXPECT_TRUE(has(buf, "static constexpr bool kRelAffine = true;")) << buf;
  EXPECT_TRUE(has(buf, "const float t0 = fa_read_f32(p.buf[0], 0LL, fa_clamp_position32(h, p.buf_shape[0][0]));\n    return t0;")) << buf;
  // Mirrored difference or a subtracted term: the sign goes into rel_slope.
  const std::string mirrored = source(score() + (q_idx() - kv_idx()) * slopes(head()));
  EXPECT_TRUE(has(mirrored, "kRelAffine = true;")) << mirrored;
  EXPECT_TRUE(has(mirrored, "return -t0;")) << mirrored;
  const std::string sub = source(score() - slopes(head()) * (kv_idx() - q_idx()));
  EXPECT_TRUE(has(sub, "kRelAffine = true;")) << sub;
  EXPECT_TRUE(has(sub, "return -t0;")) << sub;
  // Not of the shape: a coefficient that reads the position, a scaled score, a gather, a tanh.
  for (const Expr& e : {score() + (kv_idx() - q_idx()) * cast(q_idx(), DType::F32),
                        score() * 2.0 + (kv_idx() - q_idx()) * slopes(head()),
                        score() + (kv_idx() - batch()) * slopes(head()), mods::softcap(30),
                        mods::relative_bias(slopes, "S")}) {
    const std::string s = source(e);
    EXPECT_TRUE(has(s, "static constexpr bool kRelAffine = false;")) << s;
  }
}

// A relative-position bias, score + row(b, h)[+-(q_idx - kv_idx) + c] of an f32 buffer, is recognised
// (kRelGather = the sign; rel_gather gives the row, c and the row length) for the sm90 forward's per-tile
// gather (fwd_softmax_sm90.cuh, FLEXATTN_SM90_GATHER); any other shape gets no block.
TEST(EmitCuda, RelativeBiasGathersAreRecognised) {
  auto gen = [](const Expr& score_mod) {
    Variant v;
    v.score_mod = score_mod;
    return codegen::emit_cuda_variant(v, false);
  };
  const Buffer bias{"bias", DType::F32}, b16{"b16", DType::BF16};
  const codegen::GeneratedVariant rel = gen(mods::relative_bias(bias, "S"));
  EXPECT_EQ(rel.rel_gather, 1);
  EXPECT_TRUE(has(rel.source, "static constexpr int kRelGather = 1;")) << rel.source;
  EXPECT_TRUE(has(rel.source, "    n = (int)p.buf_shape[0][1];\n    return (const float*)p.buf[0] + "
                              "(((long long)fa_clamp_position32(h, p.buf_shape[0][0])) * p.buf_shape[0][1]);"))
      << rel.source;
  // kv - q with the constant first, the bias first: sign -1, c = 5 - 2 (literals live in slots).
  const codegen::GeneratedVariant mirrored = gen(bias(head(), Expr(5) + kv_idx() - q_idx() - 2) + score());
  EXPECT_EQ(mirrored.rel_gather, -1);
  EXPECT_TRUE(has(mirrored.source, "    c = fa_sub(")) << mirrored.source;
  // A one-dimensional bias: the row is the buffer.
  EXPECT_TRUE(has(gen(score() + bias[q_idx() - kv_idx()]).source, "return (const float*)p.buf[0] + (0LL);"));
  // Not of the shape: a bf16 buffer, a position in the row index, a scaled difference, a scaled score,
  // T5's buckets, a product with the bias.
  for (const Expr& e : {score() + b16(head(), q_idx() - kv_idx()), score() + bias(q_idx(), q_idx() - kv_idx()),
                        score() + bias(head(), q_idx() * 2 - kv_idx()), score() * 2.0 + bias(head(), q_idx() - kv_idx()),
                        mods::t5_bias(bias, 32, 128, true), score() * bias(head(), q_idx() - kv_idx()),
                        score() + bias(head(), q_idx() + kv_idx())}) {
    const codegen::GeneratedVariant g = gen(e);
    EXPECT_EQ(g.rel_gather, 0);
    EXPECT_FALSE(has(g.source, "kRelGather")) << g.source;
  }
}

// score + e with e a function of q_idx - kv_idx alone (T5's buckets, a formula of the distance, the gather shape)
// that the affine form does not take gets kRelDiag and rel_diag(p, b, h, q_idx, kv_idx) = e, for the sm90 forward's
// per-warp table (fwd_rel_diag_sm90.cuh, FLEXATTN_SM90_REL_DIAG); other shapes get no block.
TEST(EmitCuda, DistanceOnlyBiasesAreRecognised) {
  auto gen = [](const Expr& score_mod) {
    Variant v;
    v.score_mod = score_mod;
    return codegen::emit_cuda_variant(v, false);
  };
  const Buffer bias{"bias", DType::F32};
  for (const Expr& e : {mods::t5_bias(bias, 32, 128, true), mods::t5_bias(bias, 16, 64, false),
                        score() + log2(abs(q_idx() - kv_idx()) + 1.0),
                        bias(head(), kv_idx() - q_idx() + 3) * 0.5 + score(), score() + bias(head(), q_idx() - kv_idx())}) {
    const codegen::GeneratedVariant g = gen(e);
    EXPECT_TRUE(g.rel_diag);
    EXPECT_TRUE(has(g.source, "static constexpr bool kRelDiag = true;")) << g.source;
    const size_t a = g.source.find("static float rel_diag(const ModParams& p, int b, int h, int q_idx, int kv_idx) {");
    ASSERT_NE(a, std::string::npos) << g.source;
    // The body reads the positions (the difference) but never the score.
    const std::string body = g.source.substr(a, g.source.find("\n  }\n", a) - a);
    EXPECT_TRUE(has(body, "kv_idx")) << body;
    EXPECT_FALSE(has(body, "score")) << body;
  }
  // Not of the shape (or taken by the affine form): ALiBi's affine bias, a position alone, a scaled score, a product
  // with the score, no score_mod.
  for (const Expr& e : {mods::alibi(), score() + bias(head(), q_idx()),
                        score() * 2.0 + log2(abs(q_idx() - kv_idx()) + 1.0), score() * log2(abs(q_idx() - kv_idx()) + 1.0),
                        score() + bias(head(), q_idx() * 2 - kv_idx())}) {
    const codegen::GeneratedVariant g = gen(e);
    EXPECT_FALSE(g.rel_diag);
    EXPECT_FALSE(has(g.source, "kRelDiag")) << g.source;
  }
  EXPECT_FALSE(gen(Expr()).rel_diag);
}

// The arithmetic of the sm90 forward's affine ALiBi path (scores_inside_affine, FLEXATTN_SM90_AFFINE) in
// f32 on the host, against the interpreter (double): u = fma(slope, k, fma(raw, scale, slope * (kv0 + 2t
// - q))) with k the column inside the tile. Its error stays within that of the per-entry form the default
// kernel computes (raw * scale + (float)(kv - q) * slope, each rounded), plus one ulp of the bias: the
// switch changes rounding, not accuracy. Positions up to 8192, all 16 heads (slopes 2^-0.5 .. 2^-8).
TEST(EmitCuda, AffineAlibiArithmeticIsAsAccurateAsThePerEntryForm) {
  const Expr alibi = mods::alibi("H");
  Evaluator ev(alibi);
  EvalEnv env;
  env.scalar = [](const std::string&) { return 16.0; };
  ev.bind(env);
  std::mt19937 rng(5);
  std::normal_distribution<float> raw_dist(0.f, 30.f);
  std::uniform_int_distribution<int> pos(0, 8191), col(0, 63);
  const float scale = 1.f / std::sqrt(128.f);
  double worst_affine = 0, worst_default = 0;
  for (int h = 0; h < 16; ++h) {
    const float slope = float(ev.run(0.0, 0, h, 0, 1).as_double());  // c * (1 - 0)
    for (int n = 0; n < 20000; ++n) {
      const float raw = raw_dist(rng);
      const int q = pos(rng), kv0 = pos(rng) & ~127, j = col(rng);  // j: the lane's column pair index
      const int t = j & 3, i = j >> 3 & 15, e = j >> 2 & 1;
      const int k = 8 * i + e, kv = kv0 + 2 * t + k;
      const double want = ev.run(double(raw * scale), 0, h, q, kv).as_double();
      const float rb = slope * float(kv0 + 2 * t - q);
      float affine = std::fmaf(raw, scale, rb);
      if (k != 0) affine = std::fmaf(slope, float(k), affine);
      const float per_entry = raw * scale + float(kv - q) * slope;
      const double ulp_bias = std::ldexp(1.0, std::ilogb(std::max(std::fabs(double(rb)), 1e-30)) - 23);
      worst_affine = std::max(worst_affine, std::fabs(affine - want) - ulp_bias);
      worst_default = std::max(worst_default, std::fabs(per_entry - want));
    }
  }
  EXPECT_LE(worst_affine, worst_default) << worst_affine << " vs " << worst_default;
  EXPECT_GT(worst_default, 0.0);
}

TEST(EmitCuda, BufferGradientsWithADiagonalOrUniformIndexGetTheReductionHooks) {
  // kBufferGradReduce (kernels/sm90/bwd_buffer_grad_sm90.cuh): 2 when the one gradient load's index
  // depends on the positions only through q_idx - kv_idx, 1 when not at all, absent otherwise; the
  // per-entry buffer_grad stays for every other kernel.
  auto gen = [](const Expr& score_mod, const std::string& buffer) {
    Variant v;
    v.score_mod = score_mod;
    v.grad_buffers = {buffer};
    return codegen::emit_cuda_variant(v, true);
  };
  const Buffer bias{"bias", DType::F32}, t5{"t5_bias", DType::F32}, slopes{"slopes", DType::F32};
  const codegen::GeneratedVariant rel = gen(mods::relative_bias(bias, "S"), "bias");
  EXPECT_EQ(rel.buffer_grad_reduce, 2);
  EXPECT_TRUE(has(rel.source, "static constexpr int kBufferGradReduce = 2;")) << rel.source;
  EXPECT_TRUE(has(rel.source, "static float buffer_grad_value(")) << rel.source;
  EXPECT_TRUE(has(rel.source, "static void buffer_grad_add(const ModParams& p, int b, int h, int q_idx, int kv_idx, float v)"))
      << rel.source;
  EXPECT_TRUE(has(rel.source, "static void buffer_grad(const ModParams& p, float score,")) << rel.source;
  EXPECT_EQ(gen(mods::t5_bias(t5, 32, 128, true), "t5_bias").buffer_grad_reduce, 2);
  EXPECT_EQ(gen(mods::t5_bias(t5, 16, 64, false), "t5_bias").buffer_grad_reduce, 2);
  EXPECT_EQ(gen(mods::alibi(slopes), "slopes").buffer_grad_reduce, 1);
  // The derivative may read the score (a product): only the index matters.
  EXPECT_EQ(gen(score() * bias(head(), q_idx() - kv_idx() + 5), "bias").buffer_grad_reduce, 2);
  // Not diagonal: an absolute position, or a floor division of each position.
  const codegen::GeneratedVariant abs_pos = gen(score() + bias(head(), q_idx()), "bias");
  EXPECT_EQ(abs_pos.buffer_grad_reduce, 0);
  EXPECT_FALSE(has(abs_pos.source, "kBufferGradReduce")) << abs_pos.source;
  EXPECT_EQ(gen(score() + bias(head(), floordiv(q_idx(), 8) - floordiv(kv_idx(), 8)), "bias").buffer_grad_reduce, 0);
  // Two gradient loads keep the per-entry path (one reduction each would cost that many accumulators).
  EXPECT_EQ(gen(score() + bias(head(), q_idx() - kv_idx() + 5) + bias(head(), kv_idx() - q_idx() + 5), "bias")
                .buffer_grad_reduce, 0);
  // A buffer without a requested gradient has no hooks at all.
  Variant frozen;
  frozen.score_mod = mods::relative_bias(bias, "S");
  EXPECT_EQ(codegen::emit_cuda_variant(frozen, true).buffer_grad_reduce, 0);
}

// Softcap's shape, u * tanh(score * k) with u and k uniform (literals, scalars; k also as a divisor), gets
// the kSoftcap block the sm90 forward's folded path reads (fwd_softmax_sm90.cuh, FLEXATTN_SM90_SOFTCAP);
// any other shape gets no block at all, so its source is unchanged.
TEST(EmitCuda, SoftcapScoreModsAreRecognised) {
  auto source = [](const Expr& score_mod) {
    Variant v;
    v.score_mod = score_mod;
    return codegen::emit_cuda_variant(v, false).source;
  };
  const Expr cap = scalar("cap", DType::F32);
  const std::string lib = source(mods::softcap(30));
  EXPECT_TRUE(has(lib, "static constexpr bool kSoftcap = true;")) << lib;
  EXPECT_TRUE(has(lib, "k = fa_rcp(")) << lib;
  const std::string sc = source(tanh(score() / cap) * cap);
  EXPECT_TRUE(has(sc, "kSoftcap = true;")) << sc;
  EXPECT_TRUE(has(sc, "k = fa_rcp(")) << sc;
  const std::string mul = source(Expr(2.0) * tanh(Expr(0.25) * score()));
  EXPECT_TRUE(has(mul, "kSoftcap = true;")) << mul;
  const std::string plain = source(cap * tanh(score()));
  EXPECT_TRUE(has(plain, "kSoftcap = true;") && has(plain, "k = 1.0f;")) << plain;
  // The text form (flexattn run --score-expr): a negative cap and tanh(score * k) * u.
  for (const char* text : {"-25.0*tanh(score/25.0)", "tanh(score*0.2)*3.0"}) {
    const std::string t = source(parse(text));
    EXPECT_TRUE(has(t, "kSoftcap = true;")) << text << "\n" << t;
  }
  // tanh_approx: the same block plus kSoftcapApprox (the folded path's one-MUFU tanh); tanh's has none.
  EXPECT_FALSE(has(lib, "kSoftcapApprox")) << lib;
  for (const Expr& e : {mods::softcap(30, true), parse("tanh_approx(score * 0.2) * -3.0"), cap * tanh_approx(score())}) {
    Variant v;
    v.score_mod = e;
    const codegen::GeneratedVariant g = codegen::emit_cuda_variant(v, false);
    EXPECT_TRUE(g.softcap && g.softcap_approx) << g.source;
    EXPECT_TRUE(has(g.source, "static constexpr bool kSoftcap = true;\n  static constexpr bool kSoftcapApprox = true;"))
        << g.source;
    EXPECT_TRUE(has(g.source, "fa_tanh_approx(")) << g.source;  // the general path's score_mod
  }
  Variant exact;
  exact.score_mod = mods::softcap(30);
  EXPECT_FALSE(codegen::emit_cuda_variant(exact, false).softcap_approx);
  // Not of the shape: a positional factor, tanh of something other than a scaled score, an extra term.
  for (const Expr& e : {cast(q_idx(), DType::F32) * tanh(score() / cap), cap * tanh(score() / cap + 1.0),
                        cap * tanh(score() / cap) + 1.0, cap * tanh(score() * score()), score() * tanh(score()),
                        mods::alibi("H"), score() * 2.0}) {
    const std::string s = source(e);
    EXPECT_FALSE(has(s, "kSoftcap")) << s;
  }
}

namespace {

// The worst |w / log2(e) - interpreter| of the sm90 forward's folded softcap for u * tanh(score / d) (or
// tanh_approx), with the kernel's constants (fa_softcap_fold: t = raw * k2, w = fma(a, r, top)) and r from
// fa_tanh_rcp or fa_tanh_approx, over 20000 raw scores of N(0, 40) at D = 128.
double worst_folded_softcap_error(bool approx, float uu, float dd, std::mt19937& rng) {
  const Expr u = scalar("u", DType::F32), d = scalar("d", DType::F32);
  const Expr mod = u * (approx ? tanh_approx(score() / d) : tanh(score() / d));
  std::normal_distribution<float> raw_dist(0.f, 40.f);
  const float scale = 1.f / std::sqrt(128.f), log2e = 1.4426950408889634f;
  const auto [k2, a, top] = fa_softcap_fold(uu, fa_rcp(dd), scale, approx);
  EXPECT_TRUE(!approx || top == 0.f);
  double worst = 0;
  for (int i = 0; i < 20000; ++i) {
    const float raw = raw_dist(rng);
    EvalEnv env;
    env.score = raw * scale;
    env.scalar = [&](const std::string& n) { return double(n == "u" ? uu : dd); };
    const double want = eval(mod, env).f;
    const float r = approx ? fa_tanh_approx(raw * k2) : fa_tanh_rcp(raw * k2);
    worst = std::max(worst, std::fabs(double(std::fma(a, r, top)) / double(log2e) - want));
  }
  return worst;
}

}  // namespace

// The folded softcap arithmetic of the sm90 forward (fwd_softmax_sm90.cuh: t = raw * k2 with the score scale,
// k, sgn(u) and 2 log2(e) in k2; w = fma(a, fa_tanh_rcp(t), top), a = -2 |u| log2(e), top = |u| log2(e)) in f32
// on the host, against the interpreter: w / log2(e) stays within the error fa_mul_tanh has (the general path),
// for both signs of u and k.
TEST(EmitCuda, FoldedSoftcapArithmeticMatchesTheInterpreter) {
  std::mt19937 rng(11);
  for (float uu : {30.f, -30.f, 50.f, 5.f})
    for (float dd : {30.f, -20.f, 50.f})
      EXPECT_LT(worst_folded_softcap_error(false, uu, dd, rng), 4e-6 * std::fabs(uu)) << "u " << uu << " d " << dd;
}

// The same fold with tanh_approx (kSoftcapApprox): r = tanh(raw * k2) with k2 = -sgn(u) scale k, w = a r + top with
// a = -|u| log2(e), top = 0. The host's fa_tanh_approx is tanh (the node's definition), so this checks the signs
// and constants; the device instruction's own error (~2^-11 relative) is the GPU tier's (gpu_attention_check's
// corpus entry softcap_approx:30+causal, tests/python/gpu's test_softcap_with_approximate_tanh).
TEST(EmitCuda, FoldedApproxSoftcapArithmeticMatchesTheInterpreter) {
  std::mt19937 rng(12);
  for (float uu : {30.f, -30.f, 50.f, 5.f})
    for (float dd : {30.f, -20.f, 50.f})
      EXPECT_LT(worst_folded_softcap_error(true, uu, dd, rng), 4e-6 * std::fabs(uu)) << "u " << uu << " d " << dd;
}

// An integer beyond 32 bits widens the i32 side (an explicit i64 cast in the IR): the generated code must do that
// arithmetic in 64 bits, not wrap it in int.
TEST(EmitCuda, IntegersBeyond32BitsAreComputedIn64Bits) {
  Variant v;
  v.mask_mod = q_idx() * Expr(int64_t(2654435761)) % 7 == kv_idx() % 7;
  const std::string s = codegen::emit_cuda_variant(v, false).source;
  EXPECT_TRUE(has(s, "const long long t0 = ((long long)q_idx);\n"
                     "    const long long t1 = fa_mul(t0, ((long long)p.lit[0]));")) << s;
}
