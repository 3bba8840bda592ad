// The decode TMA ring's row map as host C++ (decode_tma.cuh, FLEXATTN_DECODE_TMA): SwizzledRows is the TMA unit's
// 128-byte swizzle, and warp_gemm.cuh's gemm_ss / gemm_rs over it read, lane by lane, the same 16 bytes as over the
// padded rows (as the decode kernel calls them) and feed the same mma sequence. The ldmatrix / mma wrappers are host
// stand-ins (decode_emu/) that record addresses; tile memories are filled as the TMA boxes would fill them (chunk k of
// row r of a [rows][64] slab at chunk k ^ (r % 8)). (Session 43's rotated rows were checked here too; they were
// removed in session 44, slower by 15 % on the H200.)
#define __device__
#define __forceinline__ inline
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "decode/decode_tma.cuh"
#include "sm80/warp_gemm.cuh"

namespace flexattn::kern {
std::vector<unsigned>* emu_loads;
std::vector<long>* emu_mmas;
const float* emu_acc0;
}  // namespace flexattn::kern

using namespace flexattn::kern;

namespace {

std::uint16_t element(int r, int c) { return std::uint16_t(((r & 63) << 9) | (c & 511)); }

enum class Layout { padded, swizzled, whole };

// rows x width elements at base: padded (stride elements per row), swizzled (the TMA boxes of decode_tma_issue:
// width / 64 slabs of [rows][128 bytes]) or whole (its whole-row boxes: line r * (width / 64) + c / 64 of 128 bytes,
// as the TMA unit writes a box (64, width / 64, rows) with the 128-byte swizzle).
std::vector<unsigned char> tile(unsigned base, int rows, int width, int stride, Layout layout) {
  std::vector<unsigned char> m(base + rows * stride * 2 + 4096, 0xEE);
  const int rb = 2 * width;
  for (int r = 0; r < rows; ++r) {
    std::vector<unsigned char> src(rb);
    for (int c = 0; c < width; ++c) {
      const std::uint16_t v = element(r, c);
      std::memcpy(&src[2 * c], &v, 2);
    }
    if (layout == Layout::padded) {
      std::memcpy(&m[base + r * stride * 2], src.data(), rb);
      continue;
    }
    for (int c = 0; c < width; c += 8) {
      const int slab = c / 64, chunk = (c % 64) / 8;
      const int line = layout == Layout::whole ? r * (width / 64) + slab : slab * rows + r;
      std::memcpy(&m[base + line * 128 + ((chunk ^ (line % 8)) * 16)], &src[2 * c], 16);
    }
  }
  return m;
}

struct Trace {
  std::vector<unsigned> loads;
  std::vector<long> mmas;
};

template <class F>
Trace record(const float* acc0, F f) {
  Trace t;
  emu_loads = &t.loads, emu_mmas = &t.mmas, emu_acc0 = acc0;
  f();
  return t;
}

// The same 16 bytes, load by load, and the same mma sequence; K rows from base `at` (Q's loads below it).
void expect_same(const Trace& padded, const Trace& mapped, const std::vector<unsigned char>& pm,
                 const std::vector<unsigned char>& rm, unsigned at, const std::string& what) {
  ASSERT_EQ(padded.loads.size(), mapped.loads.size()) << what;
  EXPECT_EQ(padded.mmas, mapped.mmas) << what;
  for (size_t i = 0; i < padded.loads.size(); ++i) {
    const unsigned x = padded.loads[i] & 0x7fffffffu, y = mapped.loads[i] & 0x7fffffffu;
    EXPECT_EQ(padded.loads[i] >> 31, mapped.loads[i] >> 31) << what << " load " << i;
    EXPECT_EQ(y % 16, 0u) << what << " load " << i;
    if (x < at) {
      EXPECT_EQ(x, y) << what << " load " << i << " (Q)";
      continue;
    }
    ASSERT_LT(y + 16, rm.size()) << what;
    EXPECT_EQ(std::memcmp(&pm[x], &rm[y], 16), 0) << what << " load " << i;
  }
}

// Rows: the map under test, over a tile filled in `layout`.
template <class Rows, int NI, int D, int BN, int WC>
void check_qk(Layout layout) {
  constexpr int SQ = D + 8, SK = D + 8;
  const unsigned sq = 0, sk = 1 << 16;
  const auto pm = tile(sk, BN, D, SK, Layout::padded), rm = tile(sk, BN, D, SK, layout);
  for (int wc = 0; wc < WC; ++wc)
    for (int lane = 0; lane < 32; ++lane) {
      const int n0 = wc * (BN / WC);
      float acc[1][NI][4] = {};
      const Trace a = record(&acc[0][0][0], [&] { gemm_ss<bf16, 1, NI, D, false, SQ, false, SK>(acc, sq, 0, sk, n0, lane); });
      const Trace b = record(&acc[0][0][0], [&] { gemm_ss<bf16, 1, NI, D, false, SQ, false, SK, Rows>(acc, sq, 0, sk, n0, lane); });
      expect_same(a, b, pm, rm, sk, "QK D=" + std::to_string(D) + " n0=" + std::to_string(n0) + " lane " + std::to_string(lane));
    }
}

template <class Rows, int NI, int Dv, int BN, int WC>
void check_pv(Layout layout) {
  constexpr int SV = Dv + 8, DI = Dv / 8;
  const unsigned sv = 1 << 16;
  const auto pm = tile(sv, BN, Dv, SV, Layout::padded), rm = tile(sv, BN, Dv, SV, layout);
  for (int wc = 0; wc < WC; ++wc)
    for (int lane = 0; lane < 32; ++lane) {
      const int n0 = wc * (BN / WC);
      float o[1][DI][4] = {};
      unsigned p[1][NI / 2][4] = {};
      const Trace a = record(&o[0][0][0], [&] { gemm_rs<bf16, 1, DI, NI / 2, true, SV>(o, p, sv + n0 * SV * 2, 0, lane); });
      const Trace b = record(&o[0][0][0], [&] {
        gemm_rs<bf16, 1, DI, NI / 2, true, SV, Rows>(o, p, sv + Rows::addr(0, n0, 0), 0, lane);
      });
      expect_same(a, b, pm, rm, sv, "PV Dv=" + std::to_string(Dv) + " n0=" + std::to_string(n0) + " lane " + std::to_string(lane));
    }
}

// A row map over a [bn rows][width] tile from address 0: every 16-byte chunk exactly once, in the 128-byte line
// line_of(r, c) (its row's); and the 16-byte reads of one column by 8 consecutive rows from a multiple of 8 (an
// ldmatrix phase) put at most max_share of them on one bank group.
template <class Addr, class Line>
void check_map(Addr addr, Line line_of, int bn, int width, int max_share) {
  std::vector<int> hits(bn * width * 2, 0);
  for (int r = 0; r < bn; ++r)
    for (int c = 0; c < width; c += 8) {
      const unsigned a = addr(r, c);
      ASSERT_EQ(a % 16, 0u);
      ASSERT_LT(a, hits.size());
      EXPECT_EQ(a / 128, unsigned(line_of(r, c))) << "row " << r << " column " << c << ": outside its 128-byte line";
      ++hits[a];
    }
  for (int i = 0; i < int(hits.size()); ++i) ASSERT_EQ(hits[i], i % 16 == 0 ? 1 : 0) << "byte " << i;
  for (int r0 = 0; r0 < bn; r0 += 8)
    for (int c = 0; c < width; c += 8) {
      int groups[8] = {};
      for (int r = r0; r < r0 + 8; ++r) ++groups[(addr(r, c) / 16) % 8];
      for (int g : groups)
        EXPECT_LE(g, max_share) << "bn " << bn << " width " << width << " rows " << r0 << ".., column " << c;
    }
}

}  // namespace

TEST(DecodeSwizzledRows, EveryChunkOnceInItsRowAndNoBankConflicts) {
  for (int width : {64, 128, 256}) {
    auto slab_line = [](int bn) { return [bn](int r, int c) { return (c / 64) * bn + r; }; };
    check_map([](int r, int c) { return SwizzledRows<64>::addr(0, r, c); }, slab_line(64), 64, width, 1);
    check_map([](int r, int c) { return SwizzledRows<32>::addr(0, r, c); }, slab_line(32), 32, width, 1);
  }
}

TEST(DecodeSwizzledRows, QkLoadsMatchThePaddedTile) {
  check_qk<SwizzledRows<64>, 2, 64, 64, 4>(Layout::swizzled);
  check_qk<SwizzledRows<64>, 2, 128, 64, 4>(Layout::swizzled);
  check_qk<SwizzledRows<32>, 2, 256, 32, 2>(Layout::swizzled);
  check_qk<SwizzledRows<64>, 8, 128, 64, 1>(Layout::swizzled);
  check_qk<SwizzledRows<64>, 8, 64, 64, 1>(Layout::swizzled);
}

TEST(DecodeSwizzledRows, PvLoadsMatchThePaddedTile) {
  check_pv<SwizzledRows<64>, 2, 64, 64, 4>(Layout::swizzled);
  check_pv<SwizzledRows<64>, 2, 128, 64, 4>(Layout::swizzled);
  check_pv<SwizzledRows<32>, 2, 256, 32, 2>(Layout::swizzled);
  check_pv<SwizzledRows<64>, 8, 128, 64, 1>(Layout::swizzled);
  check_pv<SwizzledRows<64>, 8, 64, 64, 1>(Layout::swizzled);
}

TEST(DecodeWholeRows, EveryChunkOnceInItsRowsLinesAtMostTwoWayConflicts) {
  // Lines width / 64 apart within an ldmatrix phase: 8 / (width / 64) bank groups, each twice at width 128
  // (decode_tma.cuh says why that is affordable).
  auto line = [](int width) { return [width](int r, int c) { return r * (width / 64) + c / 64; }; };
  check_map([](int r, int c) { return WholeRows<64>::addr(0, r, c); }, line(64), 64, 64, 1);
  check_map([](int r, int c) { return WholeRows<128>::addr(0, r, c); }, line(128), 64, 128, 2);
  EXPECT_EQ(WholeRows<64>::addr(0, 5, 8), SwizzledRows<64>::addr(0, 5, 8)) << "one piece a row: the slab layout";
}

TEST(DecodeWholeRows, QkLoadsMatchThePaddedTile) {
  check_qk<WholeRows<64>, 2, 64, 64, 4>(Layout::whole);
  check_qk<WholeRows<128>, 2, 128, 64, 4>(Layout::whole);
  check_qk<WholeRows<128>, 8, 128, 64, 1>(Layout::whole);
  check_qk<WholeRows<64>, 8, 64, 64, 1>(Layout::whole);
}

TEST(DecodeWholeRows, PvLoadsMatchThePaddedTile) {
  check_pv<WholeRows<64>, 2, 64, 64, 4>(Layout::whole);
  check_pv<WholeRows<128>, 2, 128, 64, 4>(Layout::whole);
  check_pv<WholeRows<128>, 8, 128, 64, 1>(Layout::whole);
  check_pv<WholeRows<64>, 8, 64, 64, 1>(Layout::whole);
}
