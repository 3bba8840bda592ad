#pragma once
// Element types of tensors and of IR values.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace flexattn {

enum class DType : uint8_t { Bool, I32, I64, F16, BF16, F32, F64 };

std::string_view dtype_name(DType t);           // "bool", "i32", "i64", "f16", "bf16", "f32", "f64"
bool parse_dtype(std::string_view s, DType* out);  // accepts the names above plus torch spellings
                                                   // ("float32", "bfloat16", "int64", ...)
int dtype_size(DType t);
inline bool is_float(DType t) { return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64; }
inline bool is_int(DType t) { return t == DType::I32 || t == DType::I64; }

// Exact conversions for the 16-bit float formats (round to nearest even on the way down).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
inline float bf16_to_float(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t float_to_bf16(float f);

// Reads element `i` of a buffer of type `t` as double (bool -> 0/1, ints exactly up to 2^53).
double load_as_double(const void* data, DType t, int64_t i);
// Writes `v` (rounded to the element type) at element `i`.
void store_from_double(void* data, DType t, int64_t i, double v);

}  // namespace flexattn
