#pragma once
// HostTensor: an owned, contiguous, row-major host array with a dtype. The CPU reference, the CLI and
// the .npy reader/writer exchange data through it.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "flexattn/dtype.h"
#include "flexattn/error.h"

namespace flexattn {

// "[2, 3]": how every message shows a shape.
inline std::string shape_string(const std::vector<int64_t>& shape) {
  std::string r = "[";
  for (size_t i = 0; i < shape.size(); ++i) r += (i ? ", " : "") + std::to_string(shape[i]);
  return r + "]";
}

// Whether the product of positive factors exceeds `limit`, without forming a product past 64 bits (a shape of
// 2^33 x 2^31 x 1 wrapped to 0 and passed the row limits).
inline bool product_exceeds(int64_t limit, std::initializer_list<int64_t> factors) {
  int64_t n = 1;
  for (int64_t f : factors)
    if (__builtin_mul_overflow(n, f, &n)) return true;
  return n > limit;
}

struct HostTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  HostTensor() = default;
  HostTensor(DType t, std::vector<int64_t> s) : dtype(t), shape(std::move(s)) {
    for (int64_t d : shape) check(d >= 0, "HostTensor: negative dimension in shape " + shape_string());
    bytes.assign(byte_size(), 0);
  }
  // Throws for a product past int64 (a wrapped count once matched an empty buffer and passed the size checks).
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      if (__builtin_mul_overflow(n, d, &n)) throw Error("tensor shape " + shape_string() + " has more than 2^63 elements");
    return n;
  }
  // numel() * the dtype's size, also checked for overflow.
  size_t byte_size() const {
    size_t b = 0;
    if (__builtin_mul_overflow(size_t(numel()), size_t(dtype_size(dtype)), &b))
      throw Error("tensor shape " + shape_string() + " has more bytes than size_t holds");
    return b;
  }
  std::string shape_string() const { return flexattn::shape_string(shape); }
  // Throws unless `bytes` is exactly what the shape and dtype need (readers trust the shape), naming the tensor.
  void check_byte_size(const std::string& name) const {
    const size_t need = byte_size();
    check(bytes.size() == need, name + " holds " + std::to_string(bytes.size()) + " bytes but shape " +
                                    shape_string() + " of " + std::string(dtype_name(dtype)) + " needs " +
                                    std::to_string(need));
  }
  int64_t dim(int i) const { return shape.at(i < 0 ? shape.size() + i : i); }
  double get(int64_t i) const { return load_as_double(bytes.data(), dtype, i); }
  void set(int64_t i, double v) { store_from_double(bytes.data(), dtype, i, v); }
  const void* data() const { return bytes.data(); }
  void* data() { return bytes.data(); }
};

}  // namespace flexattn
