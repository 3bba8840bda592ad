#pragma once
// Test oracle for BlockMask: torch's create_block_mask algorithm done literally (dense mask padded with
// False to block multiples, per-tile popcount), plus the mask_mods the tests sweep over.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "flexattn/block_mask.h"
#include "flexattn/error.h"

namespace bm_test {

using flexattn::BlockMask;
using flexattn::MaskFn;

// [B,H,nq,nkv] classes 0 skipped / 1 partial / 2 full, from a dense padded [nq*QB, nkv*KVB] mask per (b, h).
inline std::vector<uint8_t> dense_classes(const MaskFn& m, int64_t B, int64_t H, int64_t q_len, int64_t kv_len,
                                          int qb, int kvb) {
  const int64_t nq = (q_len + qb - 1) / qb, nkv = (kv_len + kvb - 1) / kvb;
  const int64_t rows = nq * qb, cols = nkv * kvb;
  std::vector<uint8_t> out;
  std::vector<uint8_t> dense(size_t(rows * cols));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t q = 0; q < rows; ++q)
        for (int64_t k = 0; k < cols; ++k) dense[size_t(q * cols + k)] = q < q_len && k < kv_len && m(b, h, q, k);
      for (int64_t i = 0; i < nq; ++i) {
        for (int64_t j = 0; j < nkv; ++j) {
          int64_t count = 0;
          for (int64_t q = i * qb; q < (i + 1) * qb; ++q)
            for (int64_t k = j * kvb; k < (j + 1) * kvb; ++k) count += dense[size_t(q * cols + k)];
          out.push_back(count == 0 ? 0 : count == int64_t(qb) * kvb ? 2 : 1);
        }
      }
    }
  }
  return out;
}

// Deterministic pseudo-random bits (splitmix64), so "random" masks are pure functions of their indices.
inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline uint64_t hash4(uint64_t seed, int64_t a, int64_t b, int64_t c, int64_t d) {
  return mix(mix(mix(mix(seed ^ uint64_t(a)) ^ uint64_t(b)) ^ uint64_t(c)) ^ uint64_t(d));
}

struct NamedMask {
  std::string name;
  MaskFn fn;
};

// The sweep's mask_mods. `qb`/`kvb` let the "tiled random" mask pick whole tiles to be full or empty, so
// that random layouts exercise all three classes.
inline std::vector<NamedMask> sweep_masks(int qb, int kvb) {
  std::vector<NamedMask> v;
  v.push_back({"causal", [](int64_t, int64_t, int64_t q, int64_t k) { return q >= k; }});
  v.push_back({"sliding_window", [](int64_t, int64_t, int64_t q, int64_t k) { return q >= k && q - k <= 37; }});
  v.push_back({"document", [](int64_t, int64_t, int64_t q, int64_t k) {
                 // Documents of lengths 50, 150, 250, ... packed one after another.
                 auto doc = [](int64_t i) {
                   int64_t d = 0, end = 50;
                   while (i >= end) end += 50 + 100 * ++d;
                   return d;
                 };
                 return doc(q) == doc(k) && q >= k;
               }});
  v.push_back({"prefix", [](int64_t, int64_t, int64_t q, int64_t k) { return k < 70 || q >= k; }});
  v.push_back({"random", [](int64_t b, int64_t h, int64_t q, int64_t k) { return hash4(1, b, h, q, k) % 3 == 0; }});
  v.push_back({"tiled_random", [qb, kvb](int64_t b, int64_t h, int64_t q, int64_t k) {
                 const uint64_t tile = hash4(2, b, h, q / qb, k / kvb) % 3;
                 return tile == 2 || (tile == 1 && hash4(3, b, h, q, k) % 2 == 0);
               }});
  return v;
}

// The first count entries are the members ascending and the rest the non-members ascending, as torch's
// stable descending argsort leaves them.
inline void expect_torch_ordering(const std::vector<int32_t>& num, const std::vector<int32_t>& idx, int64_t cols,
                                  const std::string& what) {
  for (size_t g = 0; g < num.size(); ++g) {
    std::vector<uint8_t> seen(size_t(cols), 0);
    for (int64_t k = 0; k < cols; ++k) {
      const int32_t c = idx[g * size_t(cols) + size_t(k)];
      ASSERT_TRUE(c >= 0 && c < cols && !seen[size_t(c)]) << what << " row " << g << " is not a permutation";
      seen[size_t(c)] = 1;
      if (k != 0 && k != num[g]) {
        ASSERT_LT(idx[g * size_t(cols) + size_t(k) - 1], c) << what << " row " << g;
      }
    }
  }
}

// Every array of the two masks equal (both sides, counts and ordered indices), and their lengths.
inline void expect_same_arrays(const BlockMask& got, const BlockMask& want) {
  EXPECT_EQ(got.q_len, want.q_len);
  EXPECT_EQ(got.kv_len, want.kv_len);
  EXPECT_EQ(got.kv_num_blocks, want.kv_num_blocks);
  EXPECT_EQ(got.kv_indices, want.kv_indices);
  EXPECT_EQ(got.full_kv_num_blocks, want.full_kv_num_blocks);
  EXPECT_EQ(got.full_kv_indices, want.full_kv_indices);
  EXPECT_EQ(got.q_num_blocks, want.q_num_blocks);
  EXPECT_EQ(got.q_indices, want.q_indices);
  EXPECT_EQ(got.full_q_num_blocks, want.full_q_num_blocks);
  EXPECT_EQ(got.full_q_indices, want.full_q_indices);
}

// Runs fn and checks it throws flexattn::Error whose message contains `expected`.
template <typename F>
void expect_error(F&& fn, const std::string& expected) {
  try {
    fn();
    ADD_FAILURE() << "no flexattn::Error thrown; expected one containing: " << expected;
  } catch (const flexattn::Error& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << expected;
  }
}

}  // namespace bm_test
