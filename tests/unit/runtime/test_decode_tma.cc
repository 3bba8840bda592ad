// Which decode calls take the _tma entries (FLEXATTN_DECODE_TMA; runtime/decode_tma.h), and their maps' arguments:
// no driver needed (the encode itself runs on the device, gpu_decode_check with FLEXATTN_DECODE_TMA=1).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "common/params.h"
#include "decode/decode_config.h"
#include "flexattn/error.h"
#include "runtime/decode_source.h"
#include "runtime/decode_tma.h"

using namespace flexattn;

namespace {

using Boxes = runtime::DecodeTmaBoxes;

// fn() throws an Error whose message is `expected`; `taken` says what was wrongly accepted otherwise.
template <class F>
void expect_error(F&& fn, const char* expected, const char* taken) {
  try {
    fn();
    ADD_FAILURE() << taken;
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), expected);
  }
}

// A contiguous [2, 8, 1000, d] K / [2, 8, 1000, dv] V pair, packed.

kern::AttnParams contiguous(int d, int dv) {
  alignas(256) static unsigned char pool[256];
  kern::AttnParams p{};
  p.k = pool, p.v = pool + 128;
  p.Bkv = 2, p.Hkv = 8, p.S = 1000, p.D = d, p.Dv = dv;
  p.k_sl = d, p.k_sh = 1000LL * d, p.k_sb = 8000LL * d;
  p.v_sl = dv, p.v_sh = 1000LL * dv, p.v_sb = 8000LL * dv;
  return p;
}

}  // namespace

TEST(DecodeTma, ContiguousCachesOfWholeBoxesFit) {
  std::string why;
  for (auto [d, dv] : {std::pair{64, 64}, std::pair{128, 128}, std::pair{128, 64}})
    EXPECT_TRUE(runtime::decode_tma_fits(contiguous(d, dv), DType::BF16, &why)) << d << " " << dv << ": " << why;
  EXPECT_TRUE(runtime::decode_tma_fits(contiguous(128, 128), DType::F16, &why)) << why;
}

TEST(DecodeTma, OtherCallsKeepTheBulkRowsAndSayWhy) {
  std::string why;
  kern::AttnParams p = contiguous(128, 128);
  const int table[1] = {0};
  p.page_table = table;
  EXPECT_FALSE(runtime::decode_tma_fits(p, DType::BF16, &why));
  EXPECT_NE(why.find("paged"), std::string::npos) << why;

  EXPECT_FALSE(runtime::decode_tma_fits(contiguous(96, 96), DType::BF16, &why));
  EXPECT_NE(why.find("D=96, Dv=96"), std::string::npos) << why;
  EXPECT_FALSE(runtime::decode_tma_fits(contiguous(128, 96), DType::BF16, &why));
  EXPECT_FALSE(runtime::decode_tma_fits(contiguous(256, 256), DType::BF16, &why));
  EXPECT_NE(why.find("D=256, Dv=256 (the TMA ring takes multiples of 64 up to 128)"), std::string::npos) << why;

  p = contiguous(128, 128);
  p.k_sl = 132;  // a row stride of 264 bytes: not a multiple of 16
  EXPECT_FALSE(runtime::decode_tma_fits(p, DType::BF16, &why));
  EXPECT_NE(why.find("multiples of 8 elements"), std::string::npos) << why;

  p = contiguous(128, 128);
  p.v = static_cast<const unsigned char*>(p.v) + 8;
  EXPECT_FALSE(runtime::decode_tma_fits(p, DType::BF16, &why));
  EXPECT_NE(why.find("16-byte aligned"), std::string::npos) << why;

  EXPECT_FALSE(runtime::decode_tma_fits(contiguous(128, 128), DType::F32, &why));
  EXPECT_NE(why.find("bf16 or f16"), std::string::npos) << why;
}

TEST(DecodeTma, MapsAreTheViewInBoxesOfTheDecodeTile) {
  const kern::AttnParams p = contiguous(128, 64);
  for (bool value : {false, true}) {
    const runtime::TmaMapArgs a = runtime::decode_tma_map_args(p, DType::BF16, value, Boxes{16});
    const int dim = value ? 64 : 128;
    EXPECT_EQ(a.address, value ? p.v : p.k);
    EXPECT_EQ(a.data_type, 9);  // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
    EXPECT_EQ(a.dims[0], uint64_t(dim));
    EXPECT_EQ(a.dims[1], 1000u);
    EXPECT_EQ(a.dims[2], 8u);
    EXPECT_EQ(a.dims[3], 2u);
    EXPECT_EQ(a.strides[0], uint64_t(dim) * 2);
    EXPECT_EQ(a.strides[1], 1000u * dim * 2);
    EXPECT_EQ(a.strides[2], 8000u * dim * 2);
    EXPECT_EQ(a.box[0], 64u);
    EXPECT_EQ(a.box[1], 16u);
    EXPECT_EQ(a.swizzle, 3) << "CU_TENSOR_MAP_SWIZZLE_128B: decode_tma.cuh's SwizzledRows";
  }
  EXPECT_EQ(runtime::decode_tma_map_args(p, DType::BF16, false, Boxes{64}).box[1], 64u);
}

TEST(DecodeTma, WholeRowMapsAreTheSameViewInFiveDimensions) {
  const kern::AttnParams p = contiguous(128, 64);
  for (bool value : {false, true}) {
    const runtime::TmaMapArgs a = runtime::decode_tma_map_args(p, DType::BF16, value, Boxes{16, true});
    const uint64_t dim = value ? 64 : 128;
    EXPECT_EQ(a.address, value ? p.v : p.k);
    EXPECT_EQ(a.rank, 5u);
    const uint64_t dims[5] = {64, dim / 64, 1000, 8, 2};
    const uint64_t strides[4] = {128, dim * 2, 1000 * dim * 2, 8000 * dim * 2};
    const uint32_t box[5] = {64, uint32_t(dim / 64), 16, 1, 1};
    for (int i = 0; i < 5; ++i) EXPECT_EQ(a.dims[i], dims[i]) << "dim " << i;
    for (int i = 0; i < 4; ++i) EXPECT_EQ(a.strides[i], strides[i]) << "stride " << i;
    for (int i = 0; i < 5; ++i) EXPECT_EQ(a.box[i], box[i]) << "box " << i;
    EXPECT_EQ(a.swizzle, 3) << "CU_TENSOR_MAP_SWIZZLE_128B: decode_tma.cuh's WholeRows";
  }
  EXPECT_FALSE(runtime::same_tma_map_args(runtime::decode_tma_map_args(p, DType::BF16, false, Boxes{64}),
                                          runtime::decode_tma_map_args(p, DType::BF16, false, Boxes{64, true})));
  kern::AttnParams q = contiguous(128, 128);
  q.D = 96;  // a piece of 64 columns would cross into the next row
  expect_error([&] { runtime::decode_tma_map_args(q, DType::BF16, false, Boxes{64, true}); },
               "k: whole-row TMA boxes take head dims of whole 64-column pieces, got 96",
               "D = 96 took whole-row boxes");
}

TEST(DecodeTma, L2PromotionIsTheTunedOne) {
  const kern::AttnParams p = contiguous(128, 128);
  const int promotion[4][2] = {{0, 0}, {64, 1}, {128, 2}, {256, 3}};  // CU_TENSOR_MAP_L2_PROMOTION_*
  for (const auto& pr : promotion) {
    EXPECT_EQ(runtime::decode_tma_map_args(p, DType::BF16, true, Boxes{64, false, pr[0]}).l2_promotion,
              pr[1]);
    EXPECT_EQ(runtime::decode_tma_l2_checked(pr[0]), pr[0]);
  }
  EXPECT_EQ(Boxes{}.l2_bytes, 128) << "the default (docs/env_vars.md)";
  EXPECT_FALSE(runtime::same_tma_map_args(runtime::decode_tma_map_args(p, DType::BF16, false, Boxes{64}),
                                          runtime::decode_tma_map_args(p, DType::BF16, false,
                                                                       Boxes{64, false, 256})));
}

TEST(DecodeTma, CachedMapsAreReusedOnlyForTheSameArguments) {
  const kern::AttnParams p = contiguous(128, 128);
  const runtime::TmaMapArgs k = runtime::decode_tma_map_args(p, DType::BF16, false, Boxes{64});
  EXPECT_TRUE(runtime::same_tma_map_args(k, runtime::decode_tma_map_args(p, DType::BF16, false, Boxes{64})));
  EXPECT_FALSE(runtime::same_tma_map_args(k, runtime::decode_tma_map_args(p, DType::BF16, true, Boxes{64}))) << "V";
  EXPECT_FALSE(runtime::same_tma_map_args(k, runtime::decode_tma_map_args(p, DType::BF16, false, Boxes{16}))) << "box";
  EXPECT_FALSE(runtime::same_tma_map_args(k, runtime::decode_tma_map_args(p, DType::F16, false, Boxes{64}))) << "dtype";
  kern::AttnParams q = p;
  q.S = 999;
  EXPECT_FALSE(runtime::same_tma_map_args(k, runtime::decode_tma_map_args(q, DType::BF16, false, Boxes{64}))) << "rows";
  q = p;
  q.k_sh += 8;
  EXPECT_FALSE(runtime::same_tma_map_args(k, runtime::decode_tma_map_args(q, DType::BF16, false, Boxes{64}))) << "stride";
  q = p;
  q.k = static_cast<const unsigned char*>(p.k) + 16;
  EXPECT_FALSE(runtime::same_tma_map_args(k, runtime::decode_tma_map_args(q, DType::BF16, false, Boxes{64}))) << "address";
}

TEST(DecodeTma, BoxRowsAreTheTunedOnesUpToTheTile) {
  EXPECT_EQ(FLEXATTN_DECODE_TMA_BOX, 64) << "the default box (docs/env_vars.md)";
  EXPECT_EQ(kern::decode_tma_box_rows(128, 128, 16), 16);
  EXPECT_EQ(kern::decode_tma_box_rows(128, 128, 64), 64);
  EXPECT_EQ(kern::decode_tma_box_rows(64, 64, 64), 64);
  EXPECT_EQ(kern::decode_tma_box_rows(256, 256, 64), 32) << "block_n is 32 above head dim 128";
  EXPECT_EQ(kern::decode_tma_box_rows(256, 256, 16), 16);
  EXPECT_EQ(runtime::decode_tma_box_checked(16), 16);
  EXPECT_EQ(runtime::decode_tma_box_checked(64), 64);
}

TEST(DecodeTma, TuningVariablesNameTheirChoices) {
  struct Bad {
    int (*checked)(double);
    double value;
    const char *expected, *taken;
  };
  const Bad bad[] = {
      {runtime::decode_tma_box_checked, 32, "FLEXATTN_DECODE_TMA_BOX: expected 16 or 64, got 32", "a 32-row box was taken"},
      {runtime::decode_tma_box_checked, 16.5, "FLEXATTN_DECODE_TMA_BOX: expected 16 or 64, got 16.5",
       "16.5 rows were taken as 16"},
      {runtime::decode_tma_l2_checked, 32, "FLEXATTN_DECODE_TMA_L2: expected 0, 64, 128 or 256, got 32",
       "a 32-byte promotion was taken"},
      {runtime::decode_tma_l2_checked, 64.5, "FLEXATTN_DECODE_TMA_L2: expected 0, 64, 128 or 256, got 64.5",
       "64.5 bytes were taken as 64"},
      {runtime::decode_evict_first_checked, 3, "FLEXATTN_DECODE_EVICT_FIRST: expected 0, 1 or 2, got 3",
       "level 3 was taken"},
  };
  for (const Bad& b : bad) expect_error([&] { b.checked(b.value); }, b.expected, b.taken);
}

TEST(DecodeTma, EvictFirstOnlyWhereEachKvByteIsReadOnce) {
  // pack, G, row tiles, one pass, B, Bkv, pages may share
  EXPECT_TRUE(kern::decode_kv_read_once(4, 4, 1, true, 8, 8, false)) << "the decode suite's contiguous shapes";
  EXPECT_TRUE(kern::decode_kv_read_once(4, 4, 1, true, 1, 1, true)) << "one sequence's pages";
  EXPECT_FALSE(kern::decode_kv_read_once(1, 4, 1, true, 8, 8, false)) << "per-head masks: 4 CTAs per kv head";
  EXPECT_FALSE(kern::decode_kv_read_once(4, 4, 2, true, 8, 8, false)) << "two row tiles read the same K / V";
  EXPECT_FALSE(kern::decode_kv_read_once(4, 4, 1, false, 8, 8, false)) << "a pass per mask row";
  EXPECT_FALSE(kern::decode_kv_read_once(4, 4, 1, true, 8, 1, false)) << "a cache broadcast over the batch";
  EXPECT_FALSE(kern::decode_kv_read_once(4, 4, 1, true, 8, 8, true)) << "page tables may share pages";
  EXPECT_FALSE(runtime::decode_pages_may_share(false, 1)) << "a contiguous cache";
  EXPECT_TRUE(runtime::decode_pages_may_share(true, 0));
  EXPECT_TRUE(runtime::decode_pages_may_share(true, 1)) << "level 1: page tables may share pages";
  EXPECT_FALSE(runtime::decode_pages_may_share(true, 2)) << "level 2: pages taken as unshared";
  EXPECT_EQ(runtime::decode_evict_first_checked(2), 2);
}
