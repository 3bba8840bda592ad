// Split KV = unsplit: the CPU oracle run on KV chunks (mods offset to absolute positions), merged with
// merge_attention, equals the unsplit oracle; merge_attention_backward + the oracle's backward per
// chunk gives the unsplit dq, dk, dv. Causal, sliding window, documents, fully masked rows, GQA, a
// score_mod that reads positions, chunk sizes that do not divide the length.
#include <gtest/gtest.h>

#include "cp_test_util.h"

namespace {

using namespace cp_test;
using flexattn::cp::merge_attention;
using flexattn::cp::merge_attention_backward;
using flexattn::cp::offset_mods;
using flexattn::cp::slice_blocks;
using flexattn::cp::slice_seq;
namespace cpu = flexattn::cpu;

constexpr double kTol = 1e-12;

struct Inputs {
  HostTensor q, k, v, dout, dlse;
};

// B = 2, Hq = 4, Hkv = 2 (GQA), D = 8, Dv = 6.
Inputs make_inputs(int64_t L, int64_t S, uint64_t seed) {
  return {random_tensor({2, 4, L, 8}, seed), random_tensor({2, 2, S, 8}, seed + 1),
          random_tensor({2, 2, S, 6}, seed + 2), random_tensor({2, 4, L, 6}, seed + 3),
          random_tensor({2, 4, L}, seed + 4)};
}

// KV chunk boundaries [b_i, b_{i+1}).
using Bounds = std::vector<int64_t>;

// Runs every chunk with `run(chunk, begin, end)` returning (out, lse), merges, compares with `want`.
void check_split(const Inputs& in, const Bounds& bounds, const ModFns& mods, const flexattn::BlockMask* bm,
                 const std::string& what) {
  cpu::Options whole;
  whole.block_mask = bm;
  whole.threads = 2;
  const cpu::ForwardResult want = cpu::forward(in.q, in.k, in.v, mods, whole);
  const cpu::BackwardResult want_g = cpu::backward(in.q, in.k, in.v, in.dout, &in.dlse, mods, whole);

  std::vector<HostTensor> outs, lses, ks, vs;
  std::vector<ModFns> chunk_mods;
  std::vector<flexattn::BlockMask> masks;
  masks.reserve(bounds.size());
  std::vector<cpu::Options> opts;
  for (size_t c = 0; c + 1 < bounds.size(); ++c) {
    const int64_t b0 = bounds[c], b1 = bounds[c + 1];
    ks.push_back(slice_seq(in.k, b0, b1));
    vs.push_back(slice_seq(in.v, b0, b1));
    chunk_mods.push_back(offset_mods(mods, 0, b0));
    cpu::Options o;
    o.threads = 2;
    if (bm) {
      masks.push_back(slice_blocks(*bm, 0, bm->nq, b0 / bm->kv_block,
                                   std::min(bm->nkv, (b1 + bm->kv_block - 1) / bm->kv_block)));
      o.block_mask = &masks.back();
    }
    opts.push_back(o);
    cpu::ForwardResult f = cpu::forward(in.q, ks.back(), vs.back(), chunk_mods.back(), o);
    outs.push_back(std::move(f.out));
    lses.push_back(std::move(f.lse));
  }
  const flexattn::cp::Merged m = merge_attention(outs, lses);
  expect_forward_close(m.out, m.lse, want, kTol, what);
  EXPECT_FALSE(any_nan(m.out)) << what;

  const flexattn::cp::MergeGrads g = merge_attention_backward(outs, lses, in.dout, &in.dlse);
  HostTensor dq(DType::F64, in.q.shape), dk(DType::F64, in.k.shape), dv(DType::F64, in.v.shape);
  for (size_t c = 0; c < outs.size(); ++c) {
    const cpu::BackwardResult b =
        cpu::backward(in.q, ks[c], vs[c], g.douts[c], &g.dlses[c], chunk_mods[c], opts[c]);
    for (int64_t i = 0; i < dq.numel(); ++i) dq.set(i, dq.get(i) + b.dq.get(i));
    const int64_t S = in.k.dim(2), n = bounds[c + 1] - bounds[c];
    for (int64_t bh = 0; bh < in.k.dim(0) * in.k.dim(1); ++bh)
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t d = 0; d < in.k.dim(3); ++d)
          dk.set((bh * S + bounds[c] + j) * in.k.dim(3) + d, b.dk.get((bh * n + j) * in.k.dim(3) + d));
        for (int64_t d = 0; d < in.v.dim(3); ++d)
          dv.set((bh * S + bounds[c] + j) * in.v.dim(3) + d, b.dv.get((bh * n + j) * in.v.dim(3) + d));
      }
  }
  expect_grads_close(dq, dk, dv, want_g, kTol, what);
}

TEST(SplitKv, DenseChunksMatchUnsplit) {
  const int64_t L = 37;
  const Inputs in = make_inputs(L, L, 100);
  // 10 does not divide 37; the uneven split has a one-position chunk.
  for (const Bounds& bounds : {Bounds{0, 10, 20, 30, 37}, Bounds{0, 1, 19, 36, 37}, Bounds{0, 37}}) {
    for (const NamedMask& m : self_masks(L)) {
      check_split(in, bounds, softcap_mods(m.fn), nullptr, m.name + " chunks " + std::to_string(bounds.size() - 1));
      ModFns plain;
      plain.mask_mod = m.fn;
      check_split(in, bounds, plain, nullptr, m.name + " (no score_mod)");
    }
  }
}

TEST(SplitKv, CrossAttentionChunks) {
  // L != S: q row i attends kv positions up to its scaled position.
  const int64_t L = 23, S = 41;
  const Inputs in = make_inputs(L, S, 200);
  ModFns m = softcap_mods([](int64_t, int64_t, int64_t q, int64_t kv) { return kv * 23 <= q * 41; });
  check_split(in, {0, 7, 14, 30, 41}, m, nullptr, "cross");
}

TEST(SplitKv, BlockMaskChunksMatchUnsplit) {
  // Chunks of whole kv blocks (block 8, 37 = 4 blocks + a tail of 5); the sliced block mask keeps the
  // full/partial classes, so full tiles still skip mask_mod in both runs.
  const int64_t L = 37;
  const Inputs in = make_inputs(L, L, 300);
  for (const NamedMask& m : self_masks(L)) {
    const flexattn::BlockMask bm = flexattn::build_block_mask(flexattn::MaskFn(m.fn), 2, 4, L, L, 8, 8, 1);
    check_split(in, {0, 16, 24, 37}, softcap_mods(m.fn), &bm, m.name + " block mask");
    check_split(in, {0, 8, 16, 24, 32, 37}, softcap_mods(m.fn), &bm, m.name + " block mask, 5 chunks");
  }
}

TEST(SplitKv, OffsetModsSeeAbsolutePositions) {
  std::vector<int64_t> seen;
  ModFns m;
  m.mask_mod = [&](int64_t b, int64_t h, int64_t q, int64_t kv) {
    seen = {b, h, q, kv};
    return true;
  };
  m.score_mod = [](double s, int64_t, int64_t, int64_t q, int64_t kv) { return s + double(q * 1000 + kv); };
  const ModFns o = offset_mods(m, 7, 30);
  EXPECT_TRUE(o.mask_mod(1, 2, 3, 4));
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 2, 10, 34}));
  EXPECT_EQ(o.score_mod(0.5, 0, 0, 1, 2), 0.5 + 8 * 1000 + 32);
  EXPECT_FALSE(o.score_grad);  // empty stays empty (identity)
  EXPECT_FALSE(o.buffer_grad);
}

TEST(SplitKv, SliceBlocksKeepsClassesAndTail) {
  const flexattn::BlockMask bm = flexattn::build_block_mask(
      flexattn::MaskFn([](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; }), 1, 1, 37, 37, 8, 8, 1);
  const flexattn::BlockMask s = slice_blocks(bm, 2, 5, 1, 5);
  EXPECT_EQ(s.q_len, 37 - 16);
  EXPECT_EQ(s.kv_len, 37 - 8);
  ASSERT_EQ(s.nq, 3);
  ASSERT_EQ(s.nkv, 4);
  flexattn::validate(s);
  const auto whole = flexattn::to_dense(bm), part = flexattn::to_dense(s);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(part[size_t(r * 4 + c)], whole[size_t((r + 2) * 5 + c + 1)]) << r << c;
  const flexattn::BlockMask mid = slice_blocks(bm, 0, 2, 2, 3);
  EXPECT_EQ(mid.q_len, 16);
  EXPECT_EQ(mid.kv_len, 8);
}

}  // namespace
