// TMA tensor maps (forward and backward) and the switch / eligibility rules of the sm90 forward.
#include "runtime/tma_sm90.h"

#include <cstdio>
#include <cstring>

#include "common/params.h"
#include "flexattn/error.h"
#include "jit/driver_api.h"
#include "jit/sys.h"
#include "sm90/tile_config_sm90.h"

namespace flexattn::runtime {

namespace {

constexpr int kTmaBf16 = 9;  // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
constexpr int kTmaF16 = 6;   // CU_TENSOR_MAP_DATA_TYPE_FLOAT16

std::string num(int64_t v) { return std::to_string(v); }

void encode(const TmaMapArgs& a, const char* what, kern::TmaDesc* out) {
  std::string err;
  const jit::DriverApi* api = jit::try_driver(&err);
  if (api == nullptr) throw Error(std::string(what) + ": the sm90 kernels need the CUDA driver: " + err);
  const jit::DriverApi& drv = *api;
  if (drv.cuTensorMapEncodeTiled == nullptr)
    throw Error(std::string(what) + ": the sm90 kernels need cuTensorMapEncodeTiled (CUDA 12+ driver), which " +
                drv.path + " does not export; FLEXATTN_SM90=0 uses the sm80 kernels instead");
  jit::CUtensorMap map{};
  const jit::CUresult r = drv.cuTensorMapEncodeTiled(
      &map, a.data_type, a.rank, const_cast<void*>(a.address), a.dims, a.strides, a.box, a.element_strides,
      a.interleave, a.swizzle, a.l2_promotion, a.oob_fill);
  if (r != jit::CUDA_SUCCESS) {
    std::string dims, strides;
    for (uint32_t i = 0; i < a.rank; ++i) dims += (i ? ", " : "") + num(int64_t(a.dims[i]));
    for (uint32_t i = 0; i + 1 < a.rank; ++i) strides += (i ? ", " : "") + num(int64_t(a.strides[i]));
    throw Error(std::string(what) + ": cuTensorMapEncodeTiled rejected the tensor (dims " + dims + "; byte strides " +
                strides + "): " + jit::cu_error_text(r));
  }
  static_assert(sizeof(map) == sizeof(kern::TmaDesc), "CUtensorMap is 128 bytes");
  std::memcpy(out->opaque, &map, sizeof(map));
}

}  // namespace

void encode_sm90_map(const TmaMapArgs& a, const char* what, kern::TmaDesc* out) { encode(a, what, out); }

TmaMapArgs sm90_map_args(const char* what, const void* base, DType dtype, int64_t batch, int64_t heads, int64_t rows,
                         int64_t dim, int64_t sb, int64_t sh, int64_t sl, int box_rows) {
  if (dtype != DType::BF16 && dtype != DType::F16)
    throw Error(std::string(what) + ": the sm90 kernels take bf16 or f16, got " + std::string(dtype_name(dtype)));
  if (dim < 1 || dim > 256)
    throw Error(std::string(what) + ": the sm90 kernels take head dims up to 256, got " + num(dim));
  const int64_t extents[3] = {rows, heads, batch};
  for (int64_t e : extents)
    if (e < 1 || e > (int64_t(1) << 32))
      throw Error(std::string(what) + ": every extent must be in [1, 2^32] for a TMA map, got " + num(e));
  const int64_t strides[3] = {sl, sh, sb};
  for (int64_t s : strides)
    if (s < 0 || s % 8 != 0 || s >= (int64_t(1) << 39))
      throw Error(std::string(what) + ": TMA needs strides that are multiples of 8 elements (16 bytes) below 2^39, got " +
                  num(s));
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0) throw Error(std::string(what) + ": data must be 16-byte aligned");
  TmaMapArgs a;
  a.data_type = dtype == DType::BF16 ? kTmaBf16 : kTmaF16;
  a.address = base;
  a.dims[0] = uint64_t(dim), a.dims[1] = uint64_t(rows), a.dims[2] = uint64_t(heads), a.dims[3] = uint64_t(batch);
  a.strides[0] = uint64_t(sl) * 2, a.strides[1] = uint64_t(sh) * 2, a.strides[2] = uint64_t(sb) * 2;
  a.box[0] = 64, a.box[1] = uint32_t(box_rows), a.box[2] = 1, a.box[3] = 1;
  return a;
}

bool sm90_narrow_tile(const codegen::VariantLayout& layout) {
  // FLEXATTN_SM90_NARROW=0: every variant takes the wide tile. Since the generated gathers clamp i32
  // indices in 32 bits (mod_ops.cuh), the buffer-reading corpus mods compile without spills at 128 x 128
  // too (ptxas 13.0, d 64 and 128), which the narrow rule was made for; on until a GPU run compares them.
  return !layout.buffers.empty() && jit::env_flag("FLEXATTN_SM90_NARROW", false);
}

void encode_sm90_forward_maps(kern::AttnParams* p, DType dtype, bool narrow, int kernel_d, int kernel_dv) {
  const kern::Sm90FwdTile t = kern::sm90_fwd_tile(kernel_d, kernel_dv, narrow);
  // Q and O are moved in 64-row boxes (one per consumer warpgroup), K and V in block_n-row boxes. The maps keep the call's
  // head dims: a padded kernel's boxes past them read zeros and store nothing (sm90_padded_head_dim).
  encode(sm90_map_args("q", p->q, dtype, p->B, p->Hq, p->L, p->D, p->q_sb, p->q_sh, p->q_sl, 64), "q", &p->q_map);
  encode(sm90_map_args("k", p->k, dtype, p->Bkv, p->Hkv, p->S, p->D, p->k_sb, p->k_sh, p->k_sl, t.block_n), "k",
         &p->k_map);
  encode(sm90_map_args("v", p->v, dtype, p->Bkv, p->Hkv, p->S, p->Dv, p->v_sb, p->v_sh, p->v_sl, t.block_n), "v",
         &p->v_map);
  encode(sm90_map_args("out", p->out, dtype, p->B, p->Hq, p->L, p->Dv, p->out_sb, p->out_sh, p->out_sl, 64), "out",
         &p->o_map);
}

bool sm90_forward_requested() { return jit::env_flag("FLEXATTN_SM90", true); }

Sm90RowOrder sm90_row_order_mode() {
  const std::string v = jit::env_lower("FLEXATTN_SM90_ROW_ORDER");
  if (v.empty() || v == "auto") return Sm90RowOrder::automatic;
  if (v == "0") return Sm90RowOrder::off;
  if (v == "1") return Sm90RowOrder::always;
  throw Error("FLEXATTN_SM90_ROW_ORDER: expected 0, 1 or auto, got '" + jit::env_or("FLEXATTN_SM90_ROW_ORDER") + "'");
}

bool row_order_worth_it(const int32_t* num, const int32_t* full, int64_t BH, int64_t nq) {
  for (int64_t s = 0; s < BH; ++s)
    for (int64_t r = 0; r + 1 < nq; ++r) {
      const int64_t g = s * nq + r;
      // Natural order: row r + 1 runs before row r, so it must not hold fewer blocks.
      if (int64_t(num[g]) + (full ? full[g] : 0) > int64_t(num[g + 1]) + (full ? full[g + 1] : 0)) return true;
    }
  return false;
}

// Default on since session 29 (H100, s29c: the checks' padded cases pass; forward ms sm80 family / padded sm90 kernel,
// B=2 H=16 S=8192 bf16: D=96 full 3.82 / 1.56, causal 2.23 / 0.83, D=80 causal 2.04 / 0.85, D=160 causal 3.90 / 1.24).
bool sm90_pad_head_dims_requested() { return jit::env_flag("FLEXATTN_SM90_PAD_HEAD_DIM", true); }

int sm90_fwd_head_dim(int d) {
  if (kern::sm90_head_dim_ok(d)) return d;
  return sm90_pad_head_dims_requested() ? kern::sm90_padded_head_dim(d) : 0;
}

bool sm90_decline(const std::string& why) {
  if (jit::env_flag("FLEXATTN_JIT_DEBUG")) std::fprintf(stderr, "[flexattn sm90] using the sm80 kernels: %s\n", why.c_str());
  return false;
}

bool sm90_forward_supported(const std::string& arch, const kern::AttnParams& p, bool narrow, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  if (arch != "sm_90a") return no("the device is " + arch + ", the sm90 kernels need sm_90a");
  const int d = sm90_fwd_head_dim(p.D), dv = sm90_fwd_head_dim(p.Dv);
  if (d == 0 || dv == 0)
    return no("head dims D=" + num(p.D) + ", Dv=" + num(p.Dv) + " (the sm90 forward takes 64, 128, 192, 256" +
              (sm90_pad_head_dims_requested() ? ", and multiples of 16 between 64 and 256 on the next of them)"
                                              : "; FLEXATTN_SM90_PAD_HEAD_DIM=0 turned off the multiples of 16 between them)"));
  // The softmax folds scale into its exp2 (u = QK^T, s' = u * scale * log2 e; fwd_softmax_sm90.cuh), which
  // needs an order-preserving factor. scale <= 0 (or NaN) is rare enough to leave to the sm80 family.
  if (!(p.scale > 0.f)) return no("scale " + std::to_string(p.scale) + " (the sm90 forward needs scale > 0)");
  const kern::Sm90FwdTile t = kern::sm90_fwd_tile(d, dv, narrow);
  if (p.kv_num_blocks != nullptr && !kern::sm90_mask_blocks_ok(d, dv, narrow, p.q_block, p.kv_block))
    return no("block mask BLOCK_SIZE (" + num(p.q_block) + ", " + num(p.kv_block) + ") is not a multiple of (" +
              num(t.block_m) + ", " + num(t.block_n) + ")");
  return true;
}

}  // namespace flexattn::runtime
