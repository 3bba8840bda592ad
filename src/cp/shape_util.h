#pragma once
// Argument checks shared by the context-parallel functions.
#include <string>
#include <vector>

#include "flexattn/error.h"
#include "flexattn/tensor.h"

namespace flexattn::cp::detail {

// `t` has rank `rank`, a float dtype, non-negative dims and exactly the bytes its shape needs.
inline void check_tensor(const HostTensor& t, const std::string& name, size_t rank, const char* dims) {
  check(t.shape.size() == rank, name + " must be a " + std::to_string(rank) + "-D tensor " + dims + "; got rank " +
                                    std::to_string(t.shape.size()) + " " + shape_string(t.shape));
  check(is_float(t.dtype),
        name + " must have a float dtype (f16, bf16, f32, f64); got " + std::string(dtype_name(t.dtype)));
  for (int64_t d : t.shape) check(d >= 0, name + " has a negative dimension: " + shape_string(t.shape));
  t.check_byte_size(name);
}

}  // namespace flexattn::cp::detail
