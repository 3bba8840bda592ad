#pragma once
// Conversions between Python values and the C++ API, shared by the binding files.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "flexattn/block_mask.h"
#include "flexattn/dtype.h"
#include "flexattn/expr.h"
#include "flexattn/tensor.h"
#include "flexattn/variant.h"

namespace flexattn::py {

namespace nb = nanobind;

// Any host array that speaks DLPack (numpy, torch CPU tensors); made C-contiguous on the way in.
using HostArray = nb::ndarray<nb::device::cpu, nb::c_contig, nb::ro>;
using IntArray = nb::ndarray<const int32_t, nb::device::cpu, nb::c_contig>;
using F64Array = nb::ndarray<nb::numpy, double>;
using I32Array = nb::ndarray<nb::numpy, int32_t>;

// A parsed and verified mod (the IR handle of the Python API).
struct Mod {
  ir::Expr expr;
  std::string kind;  // "score_mod" or "mask_mod"
};

// A Variant plus what the bindings need to check calls against it.
struct VariantHandle {
  Variant variant;
};

// The block mask as the host API takes it: (q_len, kv_len, q_block, kv_block, kv_num_blocks [B,H,nq],
// kv_indices [B,H,nq,nkv], full_kv_num_blocks or None, full_kv_indices or None).
using HostMaskArg = std::tuple<int64_t, int64_t, int, int, IntArray, IntArray, std::optional<IntArray>,
                               std::optional<IntArray>>;

// "f32", "float32", "bfloat16", ... -> DType; throws Error naming `what`.
DType parse_dtype_arg(const std::string& name, const std::string& what);
// The DType of a DLPack dtype, or throws Error naming `what` and the dtype.
DType dtype_of(nb::dlpack::dtype t, const std::string& what);
// A copy of `a` (any supported dtype, read exactly) as a HostTensor.
HostTensor to_host(const HostArray& a, const std::string& what);
// An owned numpy array holding `t` converted to float64 (a move when it already is).
F64Array to_numpy_f64(HostTensor&& t);
I32Array to_numpy_i32(std::vector<int32_t>&& v, std::vector<size_t> shape);

// Host scalars and buffers for the IR interpreter. `storage` owns the buffer copies.
ModBindings host_bindings(const std::map<std::string, double>& scalars, const std::map<std::string, HostArray>& buffers,
                          std::vector<HostTensor>* storage);

// The BlockMask of the host API's tuple (q_* computed by transposition), validated.
BlockMask host_block_mask(const HostMaskArg& arg);

// The 8 torch-layout arrays of `bm` (kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices,
// q_num_blocks, q_indices, full_q_num_blocks, full_q_indices), int32 numpy.
nb::tuple block_mask_arrays(BlockMask&& bm);

}  // namespace flexattn::py
