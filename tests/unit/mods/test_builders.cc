// Every library mod, evaluated by the interpreter, against its hand-written formula on a grid of
// positions (including negative distances, window edges and chunk boundaries).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "flexattn/error.h"
#include "flexattn/mods.h"
#include "mods_test_util.h"

using namespace flexattn;
using flexattn::test::error_of;
using flexattn::test::ModEnv;

namespace {

constexpr int kN = 24;  // grid of q, kv positions

template <typename F>
void expect_mask(const ir::Expr& m, F&& want, const ModEnv& env = {}) {
  ASSERT_FALSE(m.empty());
  EXPECT_EQ(m.type(), DType::Bool);
  for (int q = 0; q < kN; ++q)
    for (int kv = 0; kv < kN; ++kv) EXPECT_EQ(env.mask(m, q, kv), bool(want(q, kv))) << "q=" << q << " kv=" << kv;
}

// HF transformers T5Attention._relative_position_bucket, written directly (natural log, double).
int64_t hf_t5_bucket(int64_t rel, bool bidirectional, int64_t nb, int64_t md) {
  int64_t bucket = 0, n = 0;
  if (bidirectional) {
    nb /= 2;
    bucket += rel > 0 ? nb : 0;
    n = std::llabs(rel);
  } else {
    n = -std::min<int64_t>(rel, 0);
  }
  const int64_t max_exact = nb / 2;
  if (n < max_exact) return bucket + n;
  int64_t large = max_exact + int64_t(std::log(double(n) / max_exact) / std::log(double(md) / max_exact) *
                                      double(nb - max_exact));
  return bucket + std::min(large, nb - 1);
}

}  // namespace

TEST(Masks, Causal) { expect_mask(mods::causal(), [](int q, int kv) { return q >= kv; }); }

TEST(Masks, FullIsTrueEverywhere) { expect_mask(mods::full(), [](int, int) { return true; }); }

TEST(Masks, SlidingWindowSeesItselfAndWindowKeysBefore) {
  for (int w : {0, 1, 5}) expect_mask(mods::sliding_window(w), [w](int q, int kv) { return q >= kv && q - kv <= w; });
}

TEST(Masks, PrefixLm) {
  expect_mask(mods::prefix_lm(6), [](int q, int kv) { return kv < 6 || q >= kv; });
  expect_mask(mods::prefix_lm(0), [](int q, int kv) { return q >= kv; });
}

TEST(Masks, Chunked) {
  expect_mask(mods::chunked(5), [](int q, int kv) { return q / 5 == kv / 5; });
  expect_mask(mods::chunked(1), [](int q, int kv) { return q == kv; });
}

TEST(Masks, DilatedIsCausalWithStride) {
  expect_mask(mods::dilated(3), [](int q, int kv) { return q >= kv && (q - kv) % 3 == 0; });
}

TEST(Masks, DocumentWithI32AndI64Ids) {
  for (DType t : {DType::I32, DType::I64}) {
    HostTensor ids(t, {kN});
    for (int i = 0; i < kN; ++i) ids.set(i, i < 5 ? 0 : i < 13 ? 1 : 7);  // non-contiguous id values
    ModEnv env;
    env.add("doc", ids);
    const ir::Expr m = mods::document(ir::Buffer{"doc", t});
    auto doc = [](int i) { return i < 5 ? 0 : i < 13 ? 1 : 7; };
    expect_mask(m, [&](int q, int kv) { return doc(q) == doc(kv); }, env);
  }
}

TEST(Masks, DocumentRejectsFloatIds) {
  EXPECT_EQ(error_of([] { mods::document(ir::Buffer{"doc", DType::F32}); }),
            "document: buffer 'doc' has dtype f32, expected i32 or i64 document ids");
}

TEST(Masks, Combinators) {
  const ir::Expr both = mods::and_masks({mods::causal(), mods::chunked(4)});
  expect_mask(both, [](int q, int kv) { return q >= kv && q / 4 == kv / 4; });
  const ir::Expr either = mods::or_masks({mods::sliding_window(1), mods::chunked(4)});
  expect_mask(either, [](int q, int kv) { return (q >= kv && q - kv <= 1) || q / 4 == kv / 4; });
  expect_mask(mods::not_mask(mods::causal()), [](int q, int kv) { return q < kv; });
  expect_mask(mods::and_masks({}), [](int, int) { return true; });
  expect_mask(mods::or_masks({}), [](int, int) { return false; });
  expect_mask(mods::and_masks({mods::dilated(2)}), [](int q, int kv) { return q >= kv && (q - kv) % 2 == 0; });
}

TEST(Masks, CombinatorsRejectNonBoolAndEmptyOperands) {
  EXPECT_EQ(error_of([] { mods::and_masks({mods::causal(), ir::q_idx()}); }),
            "and_masks: operand 1 has type i32, expected a bool mask expression");
  EXPECT_EQ(error_of([] { mods::or_masks({ir::Expr()}); }),
            "or_masks: operand 0 is empty, expected a bool mask expression");
  EXPECT_EQ(error_of([] { mods::not_mask(ir::score()); }),
            "not_mask: operand 0 has type f32, expected a bool mask expression");
}

TEST(Masks, ArgumentsAreChecked) {
  EXPECT_EQ(error_of([] { mods::sliding_window(-1); }), "sliding_window: window must be >= 0, got -1");
  EXPECT_EQ(error_of([] { mods::prefix_lm(-2); }), "prefix_lm: prefix length must be >= 0, got -2");
  EXPECT_EQ(error_of([] { mods::chunked(0); }), "chunked: chunk size must be >= 1, got 0");
  EXPECT_EQ(error_of([] { mods::dilated(0); }), "dilated: stride must be >= 1, got 0");
}

// Arguments beyond 32 bits used to wrap in the i32 comparison (sliding_window(2^31) kept no entry); from 2^32 up
// they all give the 2^32 mask (positions are below 2^31), so even INT64_MAX is a valid "unbounded".
TEST(Masks, ArgumentsBeyond32BitsDoNotWrap) {
  for (int64_t big : {int64_t(1) << 31, (int64_t(1) << 32) + 2, std::numeric_limits<int64_t>::max()}) {
    SCOPED_TRACE(big);
    expect_mask(mods::sliding_window(big), [](int q, int kv) { return q >= kv; });
    expect_mask(mods::prefix_lm(big), [](int, int) { return true; });
    expect_mask(mods::chunked(big), [](int, int) { return true; });
    expect_mask(mods::dilated(big), [](int q, int kv) { return q == kv; });
  }
  for (int64_t big : {int64_t(1) << 32, (int64_t(1) << 32) + 1})
    expect_mask(mods::chunked(big), [](int, int) { return true; });
  // Arguments that fit keep the kernels' 32-bit index arithmetic.
  EXPECT_EQ(mods::sliding_window(2147483647).get(), (mods::causal() & (ir::q_idx() - ir::kv_idx() <= 2147483647)).get());
}

TEST(Mods, NumbersAreRuntimeLiteralsSoKernelsAreShared) {
  EXPECT_NE(mods::sliding_window(128).get(), mods::sliding_window(256).get());
  EXPECT_EQ(ir::structural_key(mods::sliding_window(128)), ir::structural_key(mods::sliding_window(256)));
  EXPECT_EQ(ir::structural_key(mods::softcap(20)), ir::structural_key(mods::softcap(30)));
  EXPECT_EQ(ir::structural_key(mods::chunked(64)), ir::structural_key(mods::chunked(100)));
  EXPECT_EQ(ir::structural_key(mods::t5_bucket(32, 128, true)), ir::structural_key(mods::t5_bucket(64, 256, true)));
  EXPECT_EQ(ir::literal_slots(mods::softcap(30)).size(), 1u);  // one cap, used twice
}

TEST(Scores, Softcap) {
  const ir::Expr m = mods::softcap(30);
  ModEnv env;
  for (double s : {-100.0, -3.5, 0.0, 0.25, 29.0, 1e4}) EXPECT_DOUBLE_EQ(env.score(m, s, 0, 3, 1), 30 * std::tanh(s / 30));
  EXPECT_EQ(error_of([] { mods::softcap(0); }), "softcap: cap must be a finite number > 0, got 0.000000");
  EXPECT_FALSE(error_of([] { mods::softcap(INFINITY); }).empty());
}

TEST(Scores, AlibiFromHeadCount) {
  const ir::Expr m = mods::alibi();
  ASSERT_EQ(ir::scalar_names(m), std::vector<std::string>{"H"});
  for (int heads : {8, 12}) {
    ModEnv env;
    env.scalars["H"] = heads;
    for (int h = 0; h < heads; ++h)
      for (int q = 0; q < kN; q += 5)
        for (int kv = 0; kv < kN; kv += 3) {
          const double slope = std::pow(2.0, -8.0 * (h + 1) / heads);
          EXPECT_NEAR(env.score(m, 0.5, h, q, kv), 0.5 + slope * (kv - q), 1e-12) << h << " " << q << " " << kv;
        }
  }
}

TEST(Scores, AlibiFromSlopesBuffer) {
  HostTensor slopes(DType::F32, {4});
  for (int h = 0; h < 4; ++h) slopes.set(h, 0.25 * (h + 1));
  ModEnv env;
  env.add("slopes", slopes);
  const ir::Expr m = mods::alibi(ir::Buffer{"slopes", DType::F32});
  for (int h = 0; h < 4; ++h) EXPECT_DOUBLE_EQ(env.score(m, -1.0, h, 10, 4), -1.0 + 0.25 * (h + 1) * (4 - 10));
  EXPECT_EQ(error_of([] { mods::alibi(ir::Buffer{"slopes", DType::I32}); }),
            "alibi: buffer 'slopes' has dtype i32, expected a float buffer (f32, f16 or bf16)");
}

TEST(Scores, RelativeBiasIndexesByDistance) {
  const int heads = 3, q_len = 7, kv_len = 11;
  HostTensor bias(DType::F32, {heads, q_len + kv_len - 1});
  for (int64_t i = 0; i < bias.numel(); ++i) bias.set(i, 0.5 * double(i));
  ModEnv env;
  env.add("bias", bias);
  env.scalars["S"] = kv_len;
  const ir::Expr m = mods::relative_bias(ir::Buffer{"bias", DType::F32});
  for (int h = 0; h < heads; ++h)
    for (int q = 0; q < q_len; ++q)
      for (int kv = 0; kv < kv_len; ++kv) {
        const int col = q - kv + kv_len - 1;  // distance 0 at column S - 1
        ASSERT_GE(col, 0);
        EXPECT_DOUBLE_EQ(env.score(m, 2.0, h, q, kv), 2.0 + bias.get(h * (q_len + kv_len - 1) + col));
      }
}

TEST(Scores, T5BucketMatchesTransformersFormula) {
  for (bool bidirectional : {true, false})
    for (auto [nb, md] : {std::pair<int, int>{32, 128}, {64, 256}, {16, 64}, {32, 100}, {8, 20}}) {
      const ir::Expr bucket = mods::t5_bucket(nb, md, bidirectional);
      ASSERT_EQ(bucket.type(), DType::I32);
      ModEnv env;
      for (int rel = -1000; rel <= 1000; ++rel) {
        // rel = kv_idx - q_idx
        const int64_t got = env.eval(bucket, 0, 0, 0, rel < 0 ? -rel : 0, rel < 0 ? 0 : rel).i;
        ASSERT_EQ(got, hf_t5_bucket(rel, bidirectional, nb, md))
            << "rel=" << rel << " nb=" << nb << " md=" << md << " bidirectional=" << bidirectional;
      }
    }
}

TEST(Scores, T5BucketKnownValues) {
  // Bidirectional, 32 buckets, max distance 128: exact below 8, log-spaced to 15, +16 for kv after q.
  const ir::Expr bucket = mods::t5_bucket(32, 128, true);
  ModEnv env;
  auto at = [&](int rel) { return env.eval(bucket, 0, 0, 0, rel < 0 ? -rel : 0, rel < 0 ? 0 : rel).i; };
  EXPECT_EQ(at(0), 0);
  EXPECT_EQ(at(-1), 1);
  EXPECT_EQ(at(1), 17);
  EXPECT_EQ(at(-7), 7);
  EXPECT_EQ(at(-8), 8);
  EXPECT_EQ(at(-16), 10);  // 8 + 8 * log(2) / log(16)
  EXPECT_EQ(at(-64), 14);  // 8 + 8 * 3/4: exact only because the ratio uses log2
  EXPECT_EQ(at(-127), 15);
  EXPECT_EQ(at(-5000), 15);
  EXPECT_EQ(at(5000), 31);
}

TEST(Scores, T5BiasGathersTheBucket) {
  HostTensor table(DType::F32, {2, 32});
  for (int64_t i = 0; i < table.numel(); ++i) table.set(i, double(i));
  ModEnv env;
  env.add("t5", table);
  const ir::Expr m = mods::t5_bias(ir::Buffer{"t5", DType::F32}, 32, 128, true);
  EXPECT_DOUBLE_EQ(env.score(m, 1.0, 1, 80, 16), 1.0 + 32 + 14);  // rel = -64 -> bucket 14, head 1
  EXPECT_DOUBLE_EQ(env.score(m, 1.0, 0, 0, 3), 1.0 + 16 + 3);     // rel = +3 -> bucket 19
}

TEST(Scores, T5ArgumentsAreChecked) {
  EXPECT_EQ(error_of([] { mods::t5_bucket(2, 128, true); }), "t5_bucket: num_buckets must be >= 4, got 2");
  EXPECT_EQ(error_of([] { mods::t5_bucket(1, 128, false); }), "t5_bucket: num_buckets must be >= 2, got 1");
  EXPECT_EQ(error_of([] { mods::t5_bucket(32, 8, true); }),
            "t5_bucket: max_distance must be > 8 (num_buckets / 4), got 8");
  EXPECT_FALSE(error_of([] { mods::t5_bias(ir::Buffer{"t", DType::I64}, 32, 128, true); }).empty());
}

// Large tensors are filled on several threads, each seeking the generator to its range: the values must be the
// sequential stream's. Two lengths split at different places, and a small (one-thread) fill is the common prefix.
TEST(Random, FillNormalOnThreadsIsTheSequentialStream) {
  const int64_t n = (int64_t(1) << 22) + 3;
  HostTensor a(DType::F32, {n}), b(DType::F32, {n + 2}), c(DType::F32, {20001});
  mods::fill_normal(&a, 11);
  mods::fill_normal(&b, 11);
  mods::fill_normal(&c, 11);
  for (int64_t i = 0; i < n; ++i)
    if (a.get(i) != b.get(i)) FAIL() << "element " << i << ": " << a.get(i) << " vs " << b.get(i);
  for (int64_t i = 0; i < c.numel(); ++i) ASSERT_EQ(a.get(i), c.get(i)) << i;
}

TEST(Random, FillNormalIsDeterministicAndStandard) {
  HostTensor a(DType::F32, {20001}), b(DType::F32, {20001}), c(DType::F32, {20001});
  mods::fill_normal(&a, 7);
  mods::fill_normal(&b, 7);
  mods::fill_normal(&c, 8);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_NE(a.bytes, c.bytes);
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    ASSERT_TRUE(std::isfinite(a.get(i)));
    sum += a.get(i), sq += a.get(i) * a.get(i);
  }
  const double mean = sum / double(a.numel()), var = sq / double(a.numel()) - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.03);  // 4 standard errors at n = 20001
  EXPECT_NEAR(var, 1.0, 0.05);
  HostTensor h(DType::BF16, {5}), d(DType::F64, {5});
  mods::fill_normal(&h, 7, 2.0);
  mods::fill_normal(&d, 7, 2.0);
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_NEAR(h.get(i), d.get(i), std::fabs(d.get(i)) * 0x1p-8) << "the same stream, rounded to bf16";
    EXPECT_EQ(double(bf16_to_float(float_to_bf16(float(h.get(i))))), h.get(i));
    EXPECT_NEAR(a.get(i), d.get(i) / 2, std::fabs(d.get(i)) * 0x1p-24);
  }
}
