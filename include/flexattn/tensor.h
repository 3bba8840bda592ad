#pragma once
// HostTensor: an owned, contiguous, row-major host array with a dtype. The CPU reference, the CLI and
// the .npy reader/writer exchange data through it.
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "flexattn/dtype.h"
#include "flexattn/error.h"

namespace flexattn {

struct HostTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  HostTensor() = default;
  HostTensor(DType t, std::vector<int64_t> s) : dtype(t), shape(std::move(s)) {
    bytes.assign(size_t(numel()) * size_t(dtype_size(t)), 0);
  }
  int64_t numel() const {
    return std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<int64_t>());
  }
  int64_t dim(int i) const { return shape.at(i < 0 ? shape.size() + i : i); }
  double get(int64_t i) const { return load_as_double(bytes.data(), dtype, i); }
  void set(int64_t i, double v) { store_from_double(bytes.data(), dtype, i, v); }
  const void* data() const { return bytes.data(); }
  void* data() { return bytes.data(); }
};

}  // namespace flexattn
