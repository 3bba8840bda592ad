// .npy reader/writer: round trips, the exact header numpy expects, rejection messages, and (when
// python3 with numpy is present) that numpy reads what we write and we read what numpy writes.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "flexattn/error.h"
#include "flexattn/npy.h"
#include "mods_test_util.h"

using namespace flexattn;
using flexattn::test::error_of;
namespace fs = std::filesystem;

namespace {

class Npy : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("flexattn_npy_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A file with a hand-written header (version 1.0, padded like numpy) and `data` after it.
  std::string raw(const std::string& name, const std::string& dict, const std::string& data, int major = 1) {
    std::string h = dict;
    const size_t prefix = major == 1 ? 10 : 12;
    while ((prefix + h.size() + 1) % 64) h += ' ';
    h += '\n';
    std::string out("\x93NUMPY", 6);
    out += char(major);
    out += char(0);
    for (size_t b = 0; b < prefix - 8; ++b) out += char((h.size() >> (8 * b)) & 0xff);
    out += h + data;
    std::ofstream(path(name), std::ios::binary) << out;
    return path(name);
  }

  static bool have_numpy() { return std::system("python3 -c 'import numpy' >/dev/null 2>&1") == 0; }
  // Runs a python snippet with `p` bound to the path; returns its exit status.
  static int python(const std::string& code) {
    const std::string cmd = "python3 -c \"import numpy as np, sys\n" + code + "\" >/dev/null 2>&1";
    return std::system(cmd.c_str());
  }

  fs::path dir_;
};

HostTensor iota(DType t, std::vector<int64_t> shape) {
  HostTensor r(t, std::move(shape));
  for (int64_t i = 0; i < r.numel(); ++i) r.set(i, t == DType::Bool ? double(i % 3 == 0) : double(i) * 0.5 - 3);
  return r;
}

}  // namespace

TEST_F(Npy, RoundTripsEveryDtypeAndRank) {
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::I32, DType::I64, DType::Bool})
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{}, {5}, {2, 3, 4}, {0, 3}, {1, 1, 2, 1, 3}}) {
      const HostTensor a = t == DType::I32 || t == DType::I64 ? [&] {
        HostTensor r(t, shape);
        for (int64_t i = 0; i < r.numel(); ++i) r.set(i, double(i * 7 - 11));
        return r;
      }() : iota(t, shape);
      npy::write(path("a.npy"), a);
      const HostTensor b = npy::read(path("a.npy"));
      EXPECT_EQ(b.dtype, t);
      EXPECT_EQ(b.shape, shape);
      EXPECT_EQ(b.bytes, a.bytes) << dtype_name(t);
    }
}

TEST_F(Npy, LargeIntegersSurvive) {
  HostTensor a(DType::I64, {2});
  const int64_t big = (int64_t(1) << 62) + 12345;
  std::memcpy(a.data(), &big, 8);
  npy::write(path("i.npy"), a);
  int64_t back;
  std::memcpy(&back, npy::read(path("i.npy")).data(), 8);
  EXPECT_EQ(back, big);
}

TEST_F(Npy, Bf16IsWrittenAsExactFloat32) {
  HostTensor a(DType::BF16, {4});
  const double vals[] = {1.0078125, -3.5, 1e-3, 65280};
  for (int i = 0; i < 4; ++i) a.set(i, vals[i]);
  npy::write(path("b.npy"), a);
  const HostTensor b = npy::read(path("b.npy"));
  EXPECT_EQ(b.dtype, DType::F32);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(b.get(i), a.get(i));
  EXPECT_EQ(npy::descr(DType::BF16), "<f4");
}

TEST_F(Npy, HeaderIsWhatNumpyWrites) {
  npy::write(path("h.npy"), iota(DType::F32, {2, 3}));
  std::ifstream in(path("h.npy"), std::ios::binary);
  std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(file.compare(0, 8, std::string("\x93NUMPY\x01\x00", 8)), 0);
  const size_t header_len = uint8_t(file[8]) | size_t(uint8_t(file[9])) << 8;
  EXPECT_EQ((10 + header_len) % 64, 0u) << "data starts 64-byte aligned";
  EXPECT_EQ(file.substr(10, 59), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  EXPECT_EQ(file[10 + header_len - 1], '\n');
  EXPECT_EQ(file.size(), 10 + header_len + 24);
  npy::write(path("one.npy"), iota(DType::Bool, {7}));
  std::ifstream in1(path("one.npy"), std::ios::binary);
  std::string f1((std::istreambuf_iterator<char>(in1)), std::istreambuf_iterator<char>());
  EXPECT_NE(f1.find("'descr': '|b1', 'fortran_order': False, 'shape': (7,), }"), std::string::npos);
}

TEST_F(Npy, ReadsVersion2AndLooseHeaders) {
  const std::string data(12, '\0');
  const HostTensor a = npy::read(raw("v2.npy", "{'descr':'<i4','shape':(3,),'fortran_order':False}", data, 2));
  EXPECT_EQ(a.dtype, DType::I32);
  EXPECT_EQ(a.shape, std::vector<int64_t>{3});
  const HostTensor b = npy::read(raw("l.npy", "{\"descr\": \"<i8\", \"fortran_order\": False, \"shape\": (1L, 1L), }",
                                     std::string(8, '\0')));
  EXPECT_EQ(b.shape, (std::vector<int64_t>{1, 1}));
}

TEST_F(Npy, RejectionsNameTheFileAndTheProblem) {
  const std::string p1 = raw("f.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", std::string(16, 0));
  EXPECT_EQ(error_of([&] { npy::read(p1); }),
            p1 + ": Fortran-order arrays are not supported; save a C-order array (np.ascontiguousarray)");
  const std::string p2 = raw("be.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", std::string(8, 0));
  EXPECT_EQ(error_of([&] { npy::read(p2); }),
            p2 + ": big-endian data ('>f4') is not supported; save it little-endian (arr.astype('<f4'))");
  const std::string p3 = raw("u.npy", "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }", std::string(4, 0));
  EXPECT_EQ(error_of([&] { npy::read(p3); }).rfind(p3 + ": unsupported dtype '<u2'; expected one of <f4 (float32)", 0), 0u);
  const std::string p4 = raw("t.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", std::string(31, 0));
  EXPECT_EQ(error_of([&] { npy::read(p4); }), p4 + ": truncated data: expected 32 bytes, found 31");
  const std::string p5 = raw("k.npy", "{'descr': '<f8', 'shape': (4,), }", "");
  EXPECT_EQ(error_of([&] { npy::read(p5); }), p5 + ": malformed .npy header: needs 'descr', 'fortran_order' and 'shape'");
  const std::string p6 = raw("s.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }", "");
  EXPECT_EQ(error_of([&] { npy::read(p6); }),
            p6 + ": malformed .npy header: 'shape' must be a tuple of non-negative integers");
  std::ofstream(path("text.npy")) << "hello, this is not numpy";
  EXPECT_EQ(error_of([&] { npy::read(path("text.npy")); }), path("text.npy") + ": not a .npy file (bad magic string)");
  EXPECT_EQ(error_of([&] { npy::read(path("missing.npy")); }),
            path("missing.npy") + ": cannot open for reading: No such file or directory");
  EXPECT_EQ(error_of([&] { npy::read(dir_.string()); }), dir_.string() + ": is a directory, expected a .npy file");
  EXPECT_EQ(error_of([&] { npy::write(path("no/such/dir/x.npy"), iota(DType::F32, {1})); }),
            path("no/such/dir/x.npy") + ": cannot open for writing: No such file or directory");
}

TEST_F(Npy, NumpyLoadsWhatWeWrite) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not found";
  npy::write(path("f32.npy"), iota(DType::F32, {2, 3}));
  npy::write(path("f16.npy"), iota(DType::F16, {4}));
  npy::write(path("b.npy"), iota(DType::Bool, {6}));
  HostTensor ints(DType::I64, {3});
  for (int i = 0; i < 3; ++i) ints.set(i, -i * 1000000007.0);
  npy::write(path("i64.npy"), ints);
  HostTensor bf(DType::BF16, {2});
  bf.set(0, 1.0078125), bf.set(1, -2.5);
  npy::write(path("bf.npy"), bf);
  npy::write(path("scalar.npy"), iota(DType::F64, {}));
  const std::string d = dir_.string();
  // One interpreter for all checks (starting python with numpy costs about a second).
  EXPECT_EQ(python("d = '" + d + "'\n"
                   "a = np.load(d + '/f32.npy'); assert a.dtype == np.float32 and a.shape == (2, 3)\n"
                   "assert (a.ravel() == np.arange(6) * 0.5 - 3).all()\n"
                   "a = np.load(d + '/f16.npy'); assert a.dtype == np.float16 and (a == np.arange(4) * 0.5 - 3).all()\n"
                   "a = np.load(d + '/b.npy'); assert a.dtype == np.bool_ and list(a) == [1, 0, 0, 1, 0, 0]\n"
                   "a = np.load(d + '/i64.npy'); assert a.dtype == np.int64 and a[2] == -2000000014\n"
                   "a = np.load(d + '/bf.npy'); assert a.dtype == np.float32 and list(a) == [1.0078125, -2.5]\n"
                   "a = np.load(d + '/scalar.npy'); assert a.shape == () and a == -3"),
            0);
  // The check itself can fail: a wrong expectation is reported.
  EXPECT_NE(python("a = np.load('" + d + "/f32.npy'); assert a.shape == (3, 2)"), 0);
}

TEST_F(Npy, WeReadWhatNumpyWrites) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not found";
  const std::string d = dir_.string();
  ASSERT_EQ(python("np.save('" + d + "/a.npy', np.arange(12, dtype=np.float32).reshape(3, 4) / 8); "
                   "np.save('" + d + "/i.npy', np.array([[5, -6]], dtype=np.int32)); "
                   "np.save('" + d + "/f.npy', np.asfortranarray(np.ones((2, 3)))); "
                   "np.save('" + d + "/be.npy', np.ones(3, dtype='>f8')); "
                   "np.save('" + d + "/c.npy', np.ones(3, dtype=np.complex64))"),
            0);
  const HostTensor a = npy::read(d + "/a.npy");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(a.get(11), 11.0 / 8);
  const HostTensor i = npy::read(d + "/i.npy");
  EXPECT_EQ(i.dtype, DType::I32);
  EXPECT_EQ(i.get(1), -6);
  EXPECT_NE(error_of([&] { npy::read(d + "/f.npy"); }).find("Fortran-order arrays are not supported"), std::string::npos);
  EXPECT_NE(error_of([&] { npy::read(d + "/be.npy"); }).find("big-endian data ('>f8')"), std::string::npos);
  EXPECT_NE(error_of([&] { npy::read(d + "/c.npy"); }).find("unsupported dtype '<c8'"), std::string::npos);
}
