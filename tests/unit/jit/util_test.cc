// SHA-256, the meta.json JSON subset, the ptxas report parser, the name matchers, arch names: no NVRTC needed.
#include <gtest/gtest.h>

#include "jit/device.h"
#include "jit/json.h"
#include "jit/nvrtc.h"
#include "jit/sha256.h"
#include "jit/text_match.h"

namespace flexattn::jit {
namespace {

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // Two blocks of input (56 bytes): exercises the padding that spills into a second block.
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1000000, 'a');
  EXPECT_EQ(sha256_hex(million), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  std::string data(1000, 'x');
  for (size_t i = 0; i < data.size(); ++i) data[i] = char(i * 31);
  Sha256 h;
  for (size_t i = 0; i < data.size(); i += 7) h.update(std::string_view(data).substr(i, 7));
  EXPECT_EQ(h.hex(), sha256_hex(data));
}

TEST(Sha256, FieldsAreLengthPrefixed) {
  EXPECT_NE(Sha256().field("ab").field("c").hex(), Sha256().field("a").field("bc").hex());
}

TEST(Json, RoundTrip) {
  Json j = Json::object();
  j.set("key", Json::of("attn_\"q\"\n\\"));
  j.set("n", Json::of(123456789012.0));
  j.set("x", Json::of(0.1));
  j.set("list", Json::of(std::vector<std::string>{"a", "b"}));
  j.set("nested", Json::object().set("registers", Json::of(40)));
  auto back = parse_json(to_json(j));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back->get_string("key"), "attn_\"q\"\n\\");
  EXPECT_EQ(back->get_number("n"), 123456789012.0);
  EXPECT_EQ(back->get_number("x"), 0.1);
  ASSERT_EQ(back->get("list")->items.size(), 2u);
  EXPECT_EQ(back->get("list")->items[1].str, "b");
  EXPECT_EQ(back->get("nested")->get_number("registers"), 40.0);
  EXPECT_EQ(to_json(*back), to_json(j));
}

TEST(Json, RejectsDamagedInput) {
  std::string good = to_json(Json::object().set("a", Json::of("b")).set("c", Json::of(1)));
  for (size_t cut = 0; cut < good.size(); ++cut) EXPECT_FALSE(parse_json(good.substr(0, cut))) << cut;
  EXPECT_FALSE(parse_json("{\"a\": 1} trailing"));
  EXPECT_FALSE(parse_json("{\"a\": \"\\q\"}"));
  EXPECT_FALSE(parse_json(std::string(100000, '[')));  // nesting limit, not a stack overflow
  EXPECT_TRUE(parse_json(" {\"u\": \"\\u00e9\", \"t\": true, \"f\": false, \"z\": null} "));
}

TEST(Json, LookupsOfTheWrongKindAreNull) {
  auto j = parse_json("{\"s\": 1, \"n\": \"x\"}");
  ASSERT_TRUE(j);
  EXPECT_EQ(j->get_string("s"), nullptr);
  EXPECT_FALSE(j->get_number("n").has_value());
  EXPECT_EQ(j->get("missing"), nullptr);
}

// Captured from NVRTC 13.0 (--ptxas-options=-v) for three entry functions and one device function.
const char* kCuda13Log = R"(ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'sm' for 'sm_80'
ptxas info    : Function properties for sm
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 9 registers, used 1 barriers, 4096 bytes smem, 360 bytes cmem[0]
ptxas info    : Compile time = 9.346 ms
ptxas info    : Compiling entry function 'spill' for 'sm_80'
ptxas info    : Function properties for spill
ptxas         .     8192 bytes stack frame, 24 bytes spill stores, 16 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers, 9000 bytes cumulative stack size, 364 bytes cmem[0]
ptxas info    : Compile time = 504.726 ms
ptxas info    : Function properties for _Z6helperPfi
ptxas         .     808 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'k' for 'sm_80'
ptxas info    : Function properties for k
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers, 368 bytes cmem[0]
)";

TEST(PtxasInfo, ParsesEntryFunctions) {
  auto info = parse_ptxas_info(kCuda13Log);
  ASSERT_EQ(info.size(), 3u);  // the device function _Z6helperPfi is not an entry
  EXPECT_EQ(info["sm"].registers, 9);
  EXPECT_EQ(info["sm"].smem, 4096);
  EXPECT_EQ(info["sm"].stack, 0);
  EXPECT_EQ(info["spill"].registers, 40);
  EXPECT_EQ(info["spill"].spill_stores, 24);
  EXPECT_EQ(info["spill"].spill_loads, 16);
  EXPECT_EQ(info["spill"].stack, 9000);  // cumulative (with callees) beats the own frame
  EXPECT_EQ(info["k"].registers, 8);
  EXPECT_EQ(info["k"].smem, 0);
}

TEST(PtxasInfo, ParsesTheOlderFieldOrder) {
  // CUDA 11 printed smem after cmem and had no barrier count.
  auto info = parse_ptxas_info(
      "ptxas info    : Compiling entry function 'f' for 'sm_80'\n"
      "ptxas info    : Function properties for f\n"
      "    16 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Used 255 registers, 356 bytes cmem[0], 1024 bytes smem\n");
  ASSERT_EQ(info.count("f"), 1u);
  EXPECT_EQ(info["f"].registers, 255);
  EXPECT_EQ(info["f"].smem, 1024);
  EXPECT_EQ(info["f"].stack, 16);
  EXPECT_EQ(info["f"].spill_stores, 4);
  EXPECT_EQ(info["f"].spill_loads, 8);
}

TEST(PtxasInfo, EmptyOrForeignLogGivesNothing) {
  EXPECT_TRUE(parse_ptxas_info("").empty());
  EXPECT_TRUE(parse_ptxas_info("warning: something\nUsed 12 registers\n").empty());
}

TEST(TextMatch, NumberBeforeUnit) {
  int64_t v = -1;
  EXPECT_TRUE(text::number_before("ptxas .  8192 bytes stack frame, 24 bytes spill", " bytes stack frame", v));
  EXPECT_EQ(v, 8192);
  EXPECT_TRUE(text::number_before("x 24 bytes spill stores", " bytes spill stores", v));
  EXPECT_EQ(v, 24);
  EXPECT_FALSE(text::number_before("bytes stack frame", " bytes stack frame", v));  // no number
  EXPECT_FALSE(text::number_before("abc bytes stack frame", " bytes stack frame", v));
  EXPECT_FALSE(text::number_before("12 registers", " bytes smem", v));
  EXPECT_FALSE(text::number_before("99999999999999999999 bytes smem", " bytes smem", v));  // would overflow
}

TEST(TextMatch, AfterPrefix) {
  EXPECT_EQ(text::after("ptxas info : Compiling entry function 'k_1' for 'sm_80'", "entry function '", "'"), "k_1");
  EXPECT_EQ(text::after("Function properties for _Z6helperPfi\r", "properties for ", " \t\r"), "_Z6helperPfi");
  EXPECT_EQ(text::after("nothing here", "properties for ", " "), "");
}

TEST(TextMatch, Identifiers) {
  EXPECT_TRUE(text::is_identifier("attn_fwd_sm80"));
  EXPECT_TRUE(text::is_identifier("_k9"));
  EXPECT_FALSE(text::is_identifier(""));
  EXPECT_FALSE(text::is_identifier("9k"));
  EXPECT_FALSE(text::is_identifier("bad name"));
  EXPECT_FALSE(text::is_identifier("a-b"));
}

TEST(Arch, TargetsForComputeCapabilities) {
  EXPECT_EQ(arch_for(8, 0), "sm_80");
  EXPECT_EQ(arch_for(8, 6), "sm_86");
  EXPECT_EQ(arch_for(8, 9), "sm_89");
  EXPECT_EQ(arch_for(9, 0), "sm_90a");
  EXPECT_EQ(arch_for(10, 0), "sm_100");
}

}  // namespace
}  // namespace flexattn::jit
