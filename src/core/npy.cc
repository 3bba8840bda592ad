// .npy reader/writer. Format: "\x93NUMPY", major, minor, header length (u16 for 1.x, u32 for 2.x/3.x),
// then a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...), } and the raw data.
#include "flexattn/npy.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

namespace flexattn::npy {

static_assert(std::endian::native == std::endian::little, "the .npy code assumes a little-endian host");

namespace {

constexpr char kMagic[] = "\x93NUMPY";

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw Error(path + ": " + what); }

// A cursor over the header's dict literal: just enough Python literal syntax for what numpy writes.
struct HeaderParser {
  const std::string& s;
  const std::string& path;
  size_t i = 0;

  void skip_ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  }
  bool eat(char c) {
    skip_ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  void expect(char c, const char* where) {
    if (!eat(c)) fail(path, std::string("malformed .npy header: expected '") + c + "' " + where);
  }
  std::string string_lit() {
    skip_ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) fail(path, "malformed .npy header: expected a quoted string");
    char q = s[i++];
    size_t end = s.find(q, i);
    if (end == std::string::npos) fail(path, "malformed .npy header: unterminated string");
    std::string r = s.substr(i, end - i);
    i = end + 1;
    return r;
  }
  bool bool_lit() {
    skip_ws();
    if (s.compare(i, 4, "True") == 0) { i += 4; return true; }
    if (s.compare(i, 5, "False") == 0) { i += 5; return false; }
    fail(path, "malformed .npy header: 'fortran_order' must be True or False");
  }
  std::vector<int64_t> shape_lit() {
    expect('(', "to open 'shape'");
    std::vector<int64_t> shape;
    while (!eat(')')) {
      skip_ws();
      size_t start = i;
      int64_t v = 0;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) fail(path, "shape dimension too large");
        v = v * 10 + (s[i++] - '0');
      }
      if (i == start) fail(path, "malformed .npy header: 'shape' must be a tuple of non-negative integers");
      if (i < s.size() && s[i] == 'L') ++i;  // Python 2 long suffix
      shape.push_back(v);
      if (!eat(',')) {
        expect(')', "to close 'shape'");
        break;
      }
    }
    return shape;
  }
};

struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

Header parse_header(const std::string& text, const std::string& path) {
  HeaderParser p{text, path};
  Header h;
  bool have_descr = false, have_order = false, have_shape = false;
  p.expect('{', "at the start");
  while (!p.eat('}')) {
    std::string key = p.string_lit();
    p.expect(':', "after a key");
    if (key == "descr") h.descr = p.string_lit(), have_descr = true;
    else if (key == "fortran_order") h.fortran_order = p.bool_lit(), have_order = true;
    else if (key == "shape") h.shape = p.shape_lit(), have_shape = true;
    else fail(path, "malformed .npy header: unexpected key '" + key + "'");
    if (!p.eat(',')) {
      p.expect('}', "to close the header");
      break;
    }
  }
  if (!have_descr || !have_order || !have_shape)
    fail(path, "malformed .npy header: needs 'descr', 'fortran_order' and 'shape'");
  return h;
}

DType dtype_of(const std::string& descr, const std::string& path) {
  if (!descr.empty() && descr[0] == '>')
    fail(path, "big-endian data ('" + descr + "') is not supported; save it little-endian (arr.astype('<" +
                   descr.substr(1) + "'))");
  static const struct { const char* d; DType t; } kTypes[] = {
      {"<f4", DType::F32}, {"<f8", DType::F64}, {"<f2", DType::F16}, {"<i4", DType::I32},
      {"<i8", DType::I64}, {"|b1", DType::Bool}, {"<b1", DType::Bool}, {"=b1", DType::Bool}};
  for (const auto& k : kTypes)
    if (descr == k.d) return k.t;
  fail(path, "unsupported dtype '" + descr + "'; expected one of <f4 (float32), <f8 (float64), <f2 (float16), "
             "<i4 (int32), <i8 (int64), |b1 (bool)");
}

}  // namespace

std::string descr(DType t) {
  switch (t) {
    case DType::Bool: return "|b1";
    case DType::I32: return "<i4";
    case DType::I64: return "<i8";
    case DType::F16: return "<f2";
    case DType::BF16: return "<f4";  // written as float32
    case DType::F32: return "<f4";
    case DType::F64: return "<f8";
  }
  return "?";
}

HostTensor read(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, "is a directory, expected a .npy file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot open for reading: ") + std::strerror(errno));
  std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail(path, "read error");
  if (file.size() < 10 || file.compare(0, 6, kMagic, 6) != 0) fail(path, "not a .npy file (bad magic string)");
  const int major = uint8_t(file[6]);
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = uint8_t(file[8]) | size_t(uint8_t(file[9])) << 8;
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (file.size() < 12) fail(path, "truncated .npy header");
    for (int b = 0; b < 4; ++b) header_len |= size_t(uint8_t(file[8 + b])) << (8 * b);
    offset = 12;
  } else {
    fail(path, "unsupported .npy format version " + std::to_string(major) + "; expected 1, 2 or 3");
  }
  if (file.size() - offset < header_len) fail(path, "truncated .npy header");
  Header h = parse_header(file.substr(offset, header_len), path);
  offset += header_len;
  if (h.fortran_order) fail(path, "Fortran-order arrays are not supported; save a C-order array (np.ascontiguousarray)");
  DType t = dtype_of(h.descr, path);
  int64_t numel = 1;
  for (int64_t d : h.shape) {
    if (d != 0 && numel > std::numeric_limits<int64_t>::max() / 8 / d) fail(path, "shape too large");
    numel *= d;
  }
  const size_t nbytes = size_t(numel) * size_t(dtype_size(t));
  if (file.size() - offset < nbytes)
    fail(path, "truncated data: expected " + std::to_string(nbytes) + " bytes, found " +
                   std::to_string(file.size() - offset));
  HostTensor r(t, h.shape);
  if (nbytes > 0) std::memcpy(r.data(), file.data() + offset, nbytes);  // an empty tensor has no buffer (null)
  if (t == DType::Bool)
    for (uint8_t& b : r.bytes) b = b != 0;
  return r;
}

void write(const std::string& path, const HostTensor& src) {
  const HostTensor* t = &src;
  HostTensor widened;
  if (src.dtype == DType::BF16) {
    widened = HostTensor(DType::F32, src.shape);
    for (int64_t i = 0; i < src.numel(); ++i) widened.set(i, src.get(i));
    t = &widened;
  }
  std::string dict = "{'descr': '" + descr(t->dtype) + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t->shape.size(); ++i) dict += (i ? ", " : "") + std::to_string(t->shape[i]);
  dict += t->shape.size() == 1 ? ",), }" : "), }";  // Python's one-element tuple needs the comma
  size_t prefix = 10;
  size_t total = prefix + dict.size() + 1;
  if ((total + 63) / 64 * 64 - prefix > 65535) prefix = 12;
  total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  const size_t header_len = total - prefix;
  dict.append(header_len - dict.size() - 1, ' ');
  dict += '\n';

  std::string out(kMagic, 6);
  out += char(prefix == 10 ? 1 : 2);
  out += char(0);
  for (size_t b = 0; b < (prefix == 10 ? 2u : 4u); ++b) out += char((header_len >> (8 * b)) & 0xff);
  out += dict;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail(path, std::string("cannot open for writing: ") + std::strerror(errno));
  f.write(out.data(), std::streamsize(out.size()));
  f.write(reinterpret_cast<const char*>(t->data()), std::streamsize(t->bytes.size()));
  f.close();
  if (!f) fail(path, std::string("write failed: ") + std::strerror(errno));
}

}  // namespace flexattn::npy
