// The paged-decode oracle: gather_pages undoes a scatter through an allocator's page table, and
// decode_forward agrees with the plain reference on the equivalent contiguous problem.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "flexattn/error.h"
#include "flexattn/paged.h"

using namespace flexattn;

namespace {

HostTensor randn(std::vector<int64_t> shape, unsigned seed) {
  HostTensor t(DType::F32, std::move(shape));
  std::mt19937 g(seed);
  std::normal_distribution<double> n;
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, n(g));
  return t;
}

// Writes contiguous [B, H, S, D] rows below lens into a pool through the allocator's table.
HostTensor scatter(const HostTensor& kc, const PageAllocator& a, const std::vector<int32_t>& lens) {
  const int64_t B = kc.shape[0], H = kc.shape[1], S = kc.shape[2], D = kc.shape[3], ps = a.page_size();
  HostTensor pool(kc.dtype, {a.num_pages(), H, ps, D});
  for (int64_t i = 0; i < pool.numel(); ++i) pool.set(i, NAN);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < lens[b]; ++j)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D; ++d)
          pool.set(((a.physical_page(b, j) * H + h) * ps + j % ps) * D + d, kc.get(((b * H + h) * S + j) * D + d));
  return pool;
}

}  // namespace

TEST(GatherPages, UndoesAScatterForEveryPageSize) {
  for (int64_t ps : {1, 5, 16, 128}) {
    const int64_t B = 3, H = 2, S = 150, D = 8;
    PageAllocator a(3 * ((S + ps - 1) / ps) + 2, ps, B, (S + ps - 1) / ps);
    const std::vector<int32_t> lens{150, 1, 77};
    for (int64_t t = 0; t < S; ++t)  // interleaved appends: pages of the sequences alternate in the pool
      for (int64_t b = 0; b < B; ++b)
        if (t < lens[b]) a.append(b, 1);
    const HostTensor kc = randn({B, H, S, D}, 1);
    const HostTensor pool = scatter(kc, a, lens);
    const HostTensor back = cpu::gather_pages(pool, a.page_table(), a.max_pages_per_seq(), lens, S);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t j = 0; j < S; ++j)
          for (int64_t d = 0; d < D; ++d) {
            const int64_t i = ((b * H + h) * S + j) * D + d;
            ASSERT_EQ(back.get(i), j < lens[b] ? kc.get(i) : 0.0) << ps << " " << b << " " << j;
          }
  }
}

TEST(GatherPages, UnmappedPageIsAnErrorUnlessAsked) {
  HostTensor pool(DType::F32, {2, 1, 4, 8});
  for (int64_t i = 0; i < pool.numel(); ++i) pool.set(i, 1.0 + double(i));
  EXPECT_THROW(cpu::gather_pages(pool, {0, -1}, 2, {5}, 8), Error);
  EXPECT_THROW(cpu::gather_pages(pool, {0, 7}, 2, {5}, 8), Error);
  EXPECT_NO_THROW(cpu::gather_pages(pool, {0, -1}, 2, {4}, 8));
  std::vector<uint8_t> unmapped;
  const HostTensor back = cpu::gather_pages(pool, {0, 7}, 2, {6}, 8, &unmapped);
  EXPECT_EQ(unmapped, (std::vector<uint8_t>{0, 0, 0, 0, 1, 1, 0, 0}));
  for (int64_t j = 0; j < 8; ++j)
    for (int64_t d = 0; d < 8; ++d) EXPECT_EQ(back.get(j * 8 + d), j < 4 ? pool.get(j * 8 + d) : 0.0) << j;
}

// include/flexattn/decode.h: kv rows on a page id outside the pool are masked (the kernels never read them). The
// oracle threw there instead, so the GPU checks could not cover such tables. Now it masks them: the result equals the
// contiguous problem with those rows masked through mask_mod.
TEST(DecodeForward, RowsOnPagesOutsideThePoolAreMasked) {
  const int64_t B = 2, Hq = 2, Hkv = 1, D = 8, ps = 4, max_pages = 3, S = ps * max_pages;
  const HostTensor q = randn({B, Hq, 2, D}, 8), kc = randn({B, Hkv, S, D}, 9), vc = randn({B, Hkv, S, D}, 10);
  // Sequence 0: pages 2, -1, 0 (its middle page unmapped); sequence 1: 1, 3, 99 (99 is past the pool of 4).
  const std::vector<int32_t> table{2, -1, 0, 1, 3, 99};
  HostTensor kp(DType::F32, {4, Hkv, ps, D}), vp(DType::F32, {4, Hkv, ps, D});
  for (int64_t i = 0; i < kp.numel(); ++i) kp.set(i, NAN), vp.set(i, NAN);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < S; ++j) {
      const int32_t page = table[size_t(b * max_pages + j / ps)];
      if (page < 0 || page >= 4) continue;
      for (int64_t d = 0; d < D; ++d) {
        kp.set((page * ps + j % ps) * D + d, kc.get((b * S + j) * D + d));
        vp.set((page * ps + j % ps) * D + d, vc.get((b * S + j) * D + d));
      }
    }
  cpu::DecodeReference paged;
  paged.page_table = table;
  paged.max_pages = max_pages;
  paged.kv_lens = {12, 11};
  const cpu::ForwardResult rp = cpu::decode_forward(q, kp, vp, paged, cpu::ModFns{});
  cpu::ModFns holes;
  holes.mask_mod = [](int64_t b, int64_t, int64_t, int64_t kv) { return b == 0 ? kv / 4 != 1 : kv / 4 != 2; };
  cpu::DecodeReference contiguous;
  contiguous.kv_lens = paged.kv_lens;
  const cpu::ForwardResult rc = cpu::decode_forward(q, kc, vc, contiguous, holes);
  for (int64_t i = 0; i < rc.out.numel(); ++i) {
    ASSERT_FALSE(std::isnan(rp.out.get(i))) << i;
    EXPECT_NEAR(rp.out.get(i), rc.out.get(i), 1e-12) << i;
  }
  for (int64_t i = 0; i < rc.lse.numel(); ++i) EXPECT_NEAR(rp.lse.get(i), rc.lse.get(i), 1e-12) << i;
}

TEST(DecodeForward, PagedEqualsContiguousAndTheLastRowOfCausal) {
  const int64_t B = 2, Hq = 4, Hkv = 2, S = 40, D = 8, ps = 6;
  const std::vector<int32_t> lens{40, 13};
  const HostTensor q = randn({B, Hq, 1, D}, 2), kc = randn({B, Hkv, S, D}, 3), vc = randn({B, Hkv, S, D}, 4);
  PageAllocator a(20, ps, B, 7);
  for (int64_t t = 0; t < S; ++t)
    for (int64_t b = 0; b < B; ++b)
      if (t < lens[b]) a.append(b, 1);
  cpu::ModFns causal;
  causal.mask_mod = [](int64_t, int64_t, int64_t q, int64_t kv) { return q >= kv; };
  cpu::DecodeReference contiguous;
  contiguous.kv_lens = lens;
  contiguous.q_offsets = {39, 12};
  cpu::DecodeReference paged = contiguous;
  paged.page_table = a.page_table();
  paged.max_pages = a.max_pages_per_seq();
  const cpu::ForwardResult rc = cpu::decode_forward(q, kc, vc, contiguous, causal);
  const cpu::ForwardResult rp = cpu::decode_forward(q, scatter(kc, a, lens), scatter(vc, a, lens), paged, causal);
  EXPECT_EQ(rc.out.bytes, rp.out.bytes);
  EXPECT_EQ(rc.lse.bytes, rp.lse.bytes);
  // Sequence 1: the query at position 12 attends kv 0..12, i.e. plain attention over its 13 rows.
  HostTensor k1(DType::F32, {1, Hkv, 13, D}), v1(DType::F32, {1, Hkv, 13, D}), q1(DType::F32, {1, Hq, 1, D});
  for (int64_t h = 0; h < Hkv; ++h)
    for (int64_t j = 0; j < 13; ++j)
      for (int64_t d = 0; d < D; ++d) {
        k1.set((h * 13 + j) * D + d, kc.get(((1 * Hkv + h) * S + j) * D + d));
        v1.set((h * 13 + j) * D + d, vc.get(((1 * Hkv + h) * S + j) * D + d));
      }
  for (int64_t i = 0; i < Hq * D; ++i) q1.set(i, q.get(Hq * D + i));
  const cpu::ForwardResult r1 = cpu::forward(q1, k1, v1, cpu::ModFns{});
  for (int64_t i = 0; i < Hq * D; ++i) EXPECT_NEAR(rc.out.get(Hq * D + i), r1.out.get(i), 1e-12);
  for (int64_t h = 0; h < Hq; ++h) EXPECT_NEAR(rc.lse.get(Hq + h), r1.lse.get(h), 1e-12);
}

TEST(DecodeForward, EmptySequenceIsFullyMasked) {
  const HostTensor q = randn({1, 2, 3, 8}, 5), k = randn({1, 1, 10, 8}, 6), v = randn({1, 1, 10, 8}, 7);
  cpu::DecodeReference d;
  d.kv_lens = {0};
  const cpu::ForwardResult r = cpu::decode_forward(q, k, v, d, cpu::ModFns{});
  for (int64_t i = 0; i < r.out.numel(); ++i) EXPECT_EQ(r.out.get(i), 0.0);
  for (int64_t i = 0; i < r.lse.numel(); ++i) EXPECT_EQ(r.lse.get(i), -INFINITY);
}

// Malformed arguments are errors naming them: a pool shorter than its shape was read past its end, a v pool with fewer
// pages than k silently counted rows it did not have, and a huge q_offset overflowed the positions the mods see.
TEST(DecodeForward, MalformedPoolsAndOffsetsAreErrors) {
  const auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  HostTensor pool = randn({4, 1, 2, 3}, 1);
  pool.bytes.resize(8);
  EXPECT_EQ(message([&] { cpu::gather_pages(pool, {2, 3}, 2, {4}, 4); }),
            "pool holds 8 bytes but shape [4, 1, 2, 3] of f32 needs 96");
  EXPECT_EQ(message([&] { cpu::gather_pages(randn({4, 1, 2, 3}, 1), {2, 3}, 2, {4}, -1); }), "max_len must be >= 0; got -1");
  const HostTensor q = randn({1, 1, 2, 3}, 2), k = randn({4, 1, 2, 3}, 3);
  cpu::DecodeReference d;
  d.page_table = {0, 3}, d.max_pages = 2, d.kv_lens = {4};
  EXPECT_EQ(message([&] { cpu::decode_forward(q, k, randn({2, 1, 2, 3}, 4), d, {}); }),
            "v pool [2, 1, 2, 3] must match the k pool [4, 1, 2, 3] in [num_pages, Hkv, page_size]: one page table "
            "addresses both");
  d.q_offset = INT64_MAX;
  EXPECT_EQ(message([&] { cpu::decode_forward(q, k, randn({4, 1, 2, 3}, 4), d, {}); }),
            "q_offset: must be in [0, 2^30 - L); got 9223372036854775807");
  d.q_offset = 5;
  EXPECT_EQ(message([&] { cpu::decode_forward(q, k, randn({4, 1, 2, 3}, 4), d, {}); }), "(no error)");
  // gather_pages' errors give the range and the sizes (they said "is out of range" / "B x max_pages entries")
  EXPECT_EQ(message([&] { cpu::gather_pages(randn({4, 1, 2, 3}, 1), {2, 3}, 2, {5}, 8); }),
            "kv_lens[0] = 5 is outside [0, 4] (max_len 8, max_pages x page_size 4)");
  EXPECT_EQ(message([&] { cpu::gather_pages(randn({4, 1, 2, 3}, 1), {2, 3, 1}, 2, {4}, 8); }),
            "page_table: expected 1 x max_pages = 1 x 2 entries; got 3");
}

// Per-sequence offsets are clamped into [0, 2^30 - L] as the kernels clamp them (attn_decode.cuh): above, the oracle
// let position-dependent mods see positions the kernels never use.
TEST(DecodeForward, PerSequenceOffsetsAreClampedAsTheKernelsDo) {
  const HostTensor q = randn({1, 1, 2, 8}, 8), k = randn({1, 1, 10, 8}, 9), v = randn({1, 1, 10, 8}, 10);
  cpu::ModFns m;
  m.score_mod = [](double s, int64_t, int64_t, int64_t q_idx, int64_t kv_idx) {
    return s + 1e-9 * double(q_idx % 1000) - 0.01 * double(kv_idx);
  };
  const auto run = [&](int32_t offset) {
    cpu::DecodeReference d;
    d.q_offsets = {offset};
    return cpu::decode_forward(q, k, v, d, m).out;
  };
  const HostTensor top = run((1 << 30) - 2), over = run(INT32_MAX), zero = run(0), under = run(-7);
  for (int64_t i = 0; i < top.numel(); ++i) {
    EXPECT_EQ(over.get(i), top.get(i)) << i;
    EXPECT_EQ(under.get(i), zero.get(i)) << i;
  }
}
