#pragma once
// Argument checks shared by the context-parallel functions.
#include <string>
#include <vector>

#include "flexattn/error.h"
#include "flexattn/tensor.h"

namespace flexattn::cp::detail {

inline std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// `t` has rank `rank`, a float dtype, non-negative dims and exactly the bytes its shape needs.
inline void check_tensor(const HostTensor& t, const std::string& name, size_t rank, const char* dims) {
  check(t.shape.size() == rank, name + " must be a " + std::to_string(rank) + "-D tensor " + dims + "; got rank " +
                                    std::to_string(t.shape.size()) + " " + shape_str(t.shape));
  check(is_float(t.dtype),
        name + " must have a float dtype (f16, bf16, f32, f64); got " + std::string(dtype_name(t.dtype)));
  for (int64_t d : t.shape) check(d >= 0, name + " has a negative dimension: " + shape_str(t.shape));
  const size_t need = t.byte_size();
  check(t.bytes.size() == need, name + " holds " + std::to_string(t.bytes.size()) + " bytes but shape " +
                                    shape_str(t.shape) + " of " + std::string(dtype_name(t.dtype)) + " needs " +
                                    std::to_string(need));
}

}  // namespace flexattn::cp::detail
