// The decode ring's row maps as host C++: decode_rotated.cuh's (FLEXATTN_DECODE_ROT_ROWS) puts every byte of a row once
// inside its own row with the copies cut on 32-byte source edges, and decode_tma.cuh's (FLEXATTN_DECODE_TMA) is the
// TMA unit's 128-byte swizzle; warp_gemm.cuh's gemm_ss / gemm_rs over RotatedRows or SwizzledRows read, lane by lane,
// the same 16 bytes as over the padded rows (as the decode kernel calls them) and feed the same mma sequence. The
// ldmatrix / mma wrappers are host stand-ins (decode_emu/) that record addresses; tile memories are filled as the
// bulk copies (rotated) or the TMA boxes (swizzled: chunk k of row r of a [rows][64] slab at chunk k ^ (r % 8)) would
// fill them.
#define __device__
#define __forceinline__ inline
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "decode/decode_rotated.cuh"
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

enum class Layout { padded, rotated, swizzled };

// rows x width elements at base: padded (stride elements per row), rotated (decode_bulk_row's two copies) or swizzled
// (the TMA boxes of decode_tma_issue: width / 64 slabs of [rows][128 bytes]).
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
    if (layout == Layout::swizzled) {
      for (int c = 0; c < width; c += 8) {
        const int slab = c / 64, chunk = (c % 64) / 8;
        std::memcpy(&m[base + slab * rows * 128 + r * 128 + ((chunk ^ (r % 8)) * 16)], &src[2 * c], 16);
      }
      continue;
    }
    const int dst = int(base) + r * rb, rot = decode_rot_offset(r, 0, rb) - r * rb;
    std::memcpy(&m[dst + rot], src.data(), rb - rot);
    std::memcpy(&m[dst], src.data() + rb - rot, rot);
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
void expect_same(const Trace& padded, const Trace& rotated, const std::vector<unsigned char>& pm,
                 const std::vector<unsigned char>& rm, unsigned at, const std::string& what) {
  ASSERT_EQ(padded.loads.size(), rotated.loads.size()) << what;
  EXPECT_EQ(padded.mmas, rotated.mmas) << what;
  for (size_t i = 0; i < padded.loads.size(); ++i) {
    const unsigned x = padded.loads[i] & 0x7fffffffu, y = rotated.loads[i] & 0x7fffffffu;
    EXPECT_EQ(padded.loads[i] >> 31, rotated.loads[i] >> 31) << what << " load " << i;
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

}  // namespace

TEST(DecodeRotatedRows, EveryByteOnceInItsRowAndCopiesCutOnSectorEdges) {
  for (int rb : {128, 256, 512}) {
    std::vector<int> hits(64 * rb, 0);
    for (int r = 0; r < 64; ++r) {
      const int rot = decode_rot_offset(r, 0, rb) - r * rb;
      EXPECT_EQ(rot, 32 * (r % 4));
      for (int j = 0; j < rb; ++j) {
        const int at = decode_rot_offset(r, j, rb);
        ASSERT_GE(at, r * rb);
        ASSERT_LT(at, (r + 1) * rb);
        ++hits[at];
        // Two contiguous pieces: source [0, rb - rot) from byte rot, [rb - rot, rb) from the row's start.
        if (j != 0 && j != rb - rot) {
          EXPECT_EQ(at, decode_rot_offset(r, j - 1, rb) + 1);
        }
      }
      EXPECT_EQ((rb - rot) % 32, 0) << "the cut inside a source sector";
      if (rot != 0) {
        EXPECT_EQ(decode_rot_offset(r, rb - rot, rb), r * rb);
      }
    }
    for (int h : hits) ASSERT_EQ(h, 1);
    // 16-byte reads of one column by 8 consecutive rows (an ldmatrix phase): at most 2 per bank group.
    for (int c = 0; c < rb; c += 16) {
      int groups[8] = {};
      for (int r = 0; r < 8; ++r) ++groups[(decode_rot_offset(r, c, rb) / 16) % 8];
      for (int g : groups) EXPECT_LE(g, 2) << "rb " << rb << " column byte " << c;
    }
  }
}

// The m16 tiles (4 warp columns of 16 at D <= 128, 2 at 256) and wider warp slices (m64: one warp column).
TEST(DecodeRotatedRows, QkLoadsMatchThePaddedTile) {
  check_qk<RotatedRows<128>, 2, 64, 64, 4>(Layout::rotated);
  check_qk<RotatedRows<256>, 2, 128, 64, 4>(Layout::rotated);
  check_qk<RotatedRows<512>, 2, 256, 32, 2>(Layout::rotated);
  check_qk<RotatedRows<256>, 8, 128, 64, 1>(Layout::rotated);
  check_qk<RotatedRows<128>, 8, 64, 64, 1>(Layout::rotated);
}

TEST(DecodeRotatedRows, PvLoadsMatchThePaddedTile) {
  check_pv<RotatedRows<128>, 2, 64, 64, 4>(Layout::rotated);
  check_pv<RotatedRows<256>, 2, 128, 64, 4>(Layout::rotated);
  check_pv<RotatedRows<512>, 2, 256, 32, 2>(Layout::rotated);
  check_pv<RotatedRows<256>, 8, 128, 64, 1>(Layout::rotated);
  check_pv<RotatedRows<128>, 8, 64, 64, 1>(Layout::rotated);
}

TEST(DecodeSwizzledRows, EveryChunkOnceInItsRowAndNoBankConflicts) {
  for (int width : {64, 128, 256})
    for (int bn : {32, 64}) {
      std::vector<int> hits(bn * width * 2, 0);
      for (int r = 0; r < bn; ++r)
        for (int c = 0; c < width; c += 8) {
          const unsigned at = SwizzledRows<64>::addr(0, r, c);
          const unsigned a = bn == 64 ? at : SwizzledRows<32>::addr(0, r, c);
          ASSERT_EQ(a % 16, 0u);
          ASSERT_LT(a, hits.size());
          EXPECT_EQ(a / 128 % bn, unsigned(r)) << "row " << r << " column " << c << ": outside its 128-byte row";
          ++hits[a];
        }
      for (int i = 0; i < int(hits.size()); ++i) ASSERT_EQ(hits[i], i % 16 == 0 ? 1 : 0) << "byte " << i;
      // 16-byte reads of one column by 8 consecutive rows from a multiple of 8 (an ldmatrix phase): 8 bank groups.
      for (int r0 = 0; r0 < bn; r0 += 8)
        for (int c = 0; c < width; c += 8) {
          int groups[8] = {};
          for (int r = r0; r < r0 + 8; ++r) ++groups[(SwizzledRows<64>::addr(0, r, c) / 16) % 8];
          for (int g : groups) EXPECT_EQ(g, 1) << "rows " << r0 << ".., column " << c;
        }
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
