#include "flexattn/dtype.h"

#include <cmath>

namespace flexattn {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
  }
  return "?";
}

bool parse_dtype(std::string_view s, DType* out) {
  struct Alias { std::string_view name; DType t; };
  static constexpr Alias kAliases[] = {
      {"bool", DType::Bool},    {"i32", DType::I32},      {"int32", DType::I32},   {"int", DType::I32},
      {"i64", DType::I64},      {"int64", DType::I64},    {"long", DType::I64},    {"f16", DType::F16},
      {"float16", DType::F16},  {"half", DType::F16},     {"fp16", DType::F16},    {"bf16", DType::BF16},
      {"bfloat16", DType::BF16}, {"f32", DType::F32},     {"float32", DType::F32}, {"float", DType::F32},
      {"fp32", DType::F32},     {"f64", DType::F64},      {"float64", DType::F64}, {"double", DType::F64},
  };
  if (s.substr(0, 6) == "torch.") s.remove_prefix(6);
  for (const Alias& a : kAliases)
    if (a.name == s) {
      *out = a.t;
      return true;
    }
  return false;
}

int dtype_size(DType t) {
  switch (t) {
    case DType::Bool: return 1;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::F32: return 4;
    case DType::F64: return 8;
  }
  return 0;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h >> 15) << 31;
  const int exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  float f;
  if (exp == 0) {
    f = std::ldexp(float(mant), -24);  // zero and subnormals
    return sign ? -f : f;
  }
  uint32_t u;
  if (exp == 31) u = sign | 0x7f800000u | (mant << 13);  // inf / nan
  else u = sign | (uint32_t(exp - 15 + 127) << 23) | (mant << 13);
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000);
  if (std::isnan(f)) return sign | 0x7e00;
  const float a = std::fabs(f);
  if (a >= 65520.0f) return sign | 0x7c00;  // rounds to inf
  if (a < std::ldexp(1.0f, -14)) {
    // Subnormal: value = m * 2^-24, round half to even via nearbyint in the default rounding mode.
    const float m = std::nearbyint(a * std::ldexp(1.0f, 24));
    return sign | uint16_t(m);
  }
  uint32_t au = u & 0x7fffffffu;
  // Round the 23-bit mantissa to 10 bits, half to even.
  const uint32_t lsb = (au >> 13) & 1u;
  au += 0x0fffu + lsb;
  const int exp = int(au >> 23) - 127 + 15;
  if (exp >= 31) return sign | 0x7c00;
  return sign | uint16_t(exp << 10) | uint16_t((au >> 13) & 0x3ff);
}

uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return uint16_t((u >> 16) | 0x40);
  const uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return uint16_t(u >> 16);
}

double load_as_double(const void* data, DType t, int64_t i) {
  const auto* p = static_cast<const uint8_t*>(data);
  switch (t) {
    case DType::Bool: return p[i] ? 1.0 : 0.0;
    case DType::I32: { int32_t v; std::memcpy(&v, p + 4 * i, 4); return v; }
    case DType::I64: { int64_t v; std::memcpy(&v, p + 8 * i, 8); return double(v); }
    case DType::F16: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); return half_to_float(v); }
    case DType::BF16: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); return bf16_to_float(v); }
    case DType::F32: { float v; std::memcpy(&v, p + 4 * i, 4); return v; }
    case DType::F64: { double v; std::memcpy(&v, p + 8 * i, 8); return v; }
  }
  return 0.0;
}

void store_from_double(void* data, DType t, int64_t i, double v) {
  auto* p = static_cast<uint8_t*>(data);
  switch (t) {
    case DType::Bool: p[i] = v != 0.0; return;
    case DType::I32: { int32_t x = int32_t(v); std::memcpy(p + 4 * i, &x, 4); return; }
    case DType::I64: { int64_t x = int64_t(v); std::memcpy(p + 8 * i, &x, 8); return; }
    case DType::F16: { uint16_t x = float_to_half(float(v)); std::memcpy(p + 2 * i, &x, 2); return; }
    case DType::BF16: { uint16_t x = float_to_bf16(float(v)); std::memcpy(p + 2 * i, &x, 2); return; }
    case DType::F32: { float x = float(v); std::memcpy(p + 4 * i, &x, 4); return; }
    case DType::F64: { std::memcpy(p + 8 * i, &v, 8); return; }
  }
}

}  // namespace flexattn
