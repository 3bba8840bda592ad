#include "convert.h"

#include <cstring>

#include "flexattn/error.h"

namespace flexattn::py {

namespace {

std::string dlpack_name(nb::dlpack::dtype t) {
  const char* code = "?";
  switch (nb::dlpack::dtype_code(t.code)) {
    case nb::dlpack::dtype_code::Int: code = "int"; break;
    case nb::dlpack::dtype_code::UInt: code = "uint"; break;
    case nb::dlpack::dtype_code::Float: code = "float"; break;
    case nb::dlpack::dtype_code::Bfloat: code = "bfloat"; break;
    case nb::dlpack::dtype_code::Complex: code = "complex"; break;
    case nb::dlpack::dtype_code::Bool: code = "bool"; break;
    default: break;
  }
  return std::string(code) + std::to_string(int(t.bits));
}

std::vector<int64_t> shape_of(const HostArray& a) {
  std::vector<int64_t> s(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) s[i] = int64_t(a.shape(i));
  return s;
}

std::vector<int32_t> copy_ints(const IntArray& a) {
  const int32_t* p = a.data();
  return std::vector<int32_t>(p, p + a.size());
}

}  // namespace

DType parse_dtype_arg(const std::string& name, const std::string& what) {
  DType t;
  if (!parse_dtype(name, &t)) throw Error(what + ": unknown dtype '" + name + "'");
  return t;
}

DType dtype_of(nb::dlpack::dtype t, const std::string& what) {
  using C = nb::dlpack::dtype_code;
  if (t.lanes == 1) {
    const C c = C(t.code);
    if (c == C::Float && t.bits == 16) return DType::F16;
    if (c == C::Float && t.bits == 32) return DType::F32;
    if (c == C::Float && t.bits == 64) return DType::F64;
    if (c == C::Bfloat && t.bits == 16) return DType::BF16;
    if (c == C::Int && t.bits == 32) return DType::I32;
    if (c == C::Int && t.bits == 64) return DType::I64;
    if (c == C::Bool && t.bits == 8) return DType::Bool;
  }
  throw Error(what + ": unsupported dtype " + dlpack_name(t) +
              " (expected float16, bfloat16, float32, float64, int32, int64 or bool)");
}

HostTensor to_host(const HostArray& a, const std::string& what) {
  HostTensor t(dtype_of(a.dtype(), what), shape_of(a));
  if (!t.bytes.empty()) std::memcpy(t.bytes.data(), a.data(), t.bytes.size());
  return t;
}

F64Array to_numpy_f64(HostTensor&& t) {
  if (t.dtype != DType::F64) {
    HostTensor c(DType::F64, t.shape);
    for (int64_t i = 0; i < t.numel(); ++i) c.set(i, t.get(i));
    t = std::move(c);
  }
  auto* owned = new HostTensor(std::move(t));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<HostTensor*>(p); });
  std::vector<size_t> shape(owned->shape.begin(), owned->shape.end());
  return F64Array(owned->data(), shape.size(), shape.data(), owner);
}

I32Array to_numpy_i32(std::vector<int32_t>&& v, std::vector<size_t> shape) {
  auto* owned = new std::vector<int32_t>(std::move(v));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<int32_t>*>(p); });
  return I32Array(owned->data(), shape.size(), shape.data(), owner);
}

ModBindings host_bindings(const std::map<std::string, double>& scalars, const std::map<std::string, HostArray>& buffers,
                          std::vector<HostTensor>* storage) {
  ModBindings b;
  b.scalars = scalars;
  storage->reserve(buffers.size());
  for (const auto& [name, arr] : buffers) {
    storage->push_back(to_host(arr, "buffer '" + name + "'"));
    const HostTensor& t = storage->back();
    check(t.dtype != DType::F64, "buffer '" + name + "': float64 buffers are not supported (pass float32)");
    check(!t.shape.empty(), "buffer '" + name + "': a buffer must have at least one dimension (pass a 0-d value "
                            "as a scalar)");
    b.buffers[name] = ir::BufferView{t.dtype, t.shape, t.data()};
  }
  return b;
}

BlockMask host_block_mask(const HostMaskArg& arg) {
  const auto& [q_len, kv_len, q_block, kv_block, num, idx, full_num, full_idx] = arg;
  check(num.ndim() == 3, "block_mask: kv_num_blocks must be [B, H, nq], got " + std::to_string(num.ndim()) + " dims");
  check(idx.ndim() == 4, "block_mask: kv_indices must be [B, H, nq, nkv], got " + std::to_string(idx.ndim()) + " dims");
  check(full_num.has_value() == full_idx.has_value(),
        "block_mask: full_kv_num_blocks and full_kv_indices must be both given or both None");
  for (size_t d = 0; d < 3; ++d)
    check(num.shape(d) == idx.shape(d), "block_mask: kv_num_blocks and kv_indices disagree on dim " +
                                            std::to_string(d));
  const int64_t B = int64_t(idx.shape(0)), H = int64_t(idx.shape(1));
  const int64_t nq = int64_t(idx.shape(2)), nkv = int64_t(idx.shape(3));
  std::vector<int32_t> fnum, fidx;
  if (full_num) {
    check(full_num->ndim() == 3 && full_idx->ndim() == 4, "block_mask: full_kv_num_blocks must be [B, H, nq] and "
                                                          "full_kv_indices [B, H, nq, nkv]");
    for (size_t d = 0; d < 4; ++d)
      check(full_idx->shape(d) == idx.shape(d) && (d == 3 || full_num->shape(d) == idx.shape(d)),
            "block_mask: the full_kv_* arrays must have the shapes of the kv_* arrays");
    fnum = copy_ints(*full_num), fidx = copy_ints(*full_idx);
  }
  return from_kv_blocks(copy_ints(num), copy_ints(idx), full_num ? &fnum : nullptr, full_num ? &fidx : nullptr, B, H,
                        nq, nkv, q_block, kv_block, q_len, kv_len);
}

nb::tuple block_mask_arrays(BlockMask&& bm) {
  const size_t B = size_t(bm.B), H = size_t(bm.H), nq = size_t(bm.nq), nkv = size_t(bm.nkv);
  return nb::make_tuple(to_numpy_i32(std::move(bm.kv_num_blocks), {B, H, nq}),
                        to_numpy_i32(std::move(bm.kv_indices), {B, H, nq, nkv}),
                        to_numpy_i32(std::move(bm.full_kv_num_blocks), {B, H, nq}),
                        to_numpy_i32(std::move(bm.full_kv_indices), {B, H, nq, nkv}),
                        to_numpy_i32(std::move(bm.q_num_blocks), {B, H, nkv}),
                        to_numpy_i32(std::move(bm.q_indices), {B, H, nkv, nq}),
                        to_numpy_i32(std::move(bm.full_q_num_blocks), {B, H, nkv}),
                        to_numpy_i32(std::move(bm.full_q_indices), {B, H, nkv, nq}));
}

}  // namespace flexattn::py
