#pragma once
// Host side of the sm90 (Hopper) forward: TMA tensor-map encoding, the generated kernel source, and
// the opt-in that routes cuda_forward to it (FLEXATTN_SM90=1, docs/env_vars.md). The default dispatch
// stays on the sm80 family until the sm90 kernels have been checked on a GPU (docs/kernels_sm90.md).
#include <cstdint>
#include <string>

#include "flexattn/codegen.h"
#include "flexattn/dtype.h"

namespace flexattn::kern {
struct AttnParams;
struct TmaDesc;
}

namespace flexattn::runtime {

struct KernelSetKey;
struct Sm90FwdForm;

// The arguments of one cuTensorMapEncodeTiled call (enum values as in cuda.h), kept as data so tests
// can check them without a driver. 4-D, innermost first: (head dim, rows, head, batch); strides in
// bytes for dims 1..3; box (64, box_rows, 1, 1): one 128-byte row per box row = one 128B-swizzle span,
// so a tile of C columns is C / 64 boxes (kernels/sm90/tile_config_sm90.h). The decode ring's whole-row
// maps are 5-D (runtime/decode_tma.h); fields past `rank` are unused.
struct TmaMapArgs {
  int data_type = 0;  // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 (9) or _FLOAT16 (6)
  uint32_t rank = 4;
  const void* address = nullptr;
  uint64_t dims[5] = {};
  uint64_t strides[4] = {};
  uint32_t box[5] = {};
  uint32_t element_strides[5] = {1, 1, 1, 1, 1};
  int interleave = 0;  // CU_TENSOR_MAP_INTERLEAVE_NONE
  int swizzle = 3;     // CU_TENSOR_MAP_SWIZZLE_128B
  int l2_promotion = 2;  // CU_TENSOR_MAP_L2_PROMOTION_L2_128B
  int oob_fill = 0;      // CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: out-of-bounds elements read as zero
};

// Map of a [batch, heads, rows, dim] tensor with element strides (sb, sh, sl, 1). Throws Error naming
// `what` when the layout cannot be described (dim above 256, a stride not a multiple of 8 elements or not below 2^39
// elements, an extent of 0 or above 2^32). Boxes are 64 columns wide; a dim that is not a multiple of 64 (a padded
// kernel's, sm90_padded_head_dim) reads zeros past it and stores nothing there.
TmaMapArgs sm90_map_args(const char* what, const void* base, DType dtype, int64_t batch, int64_t heads, int64_t rows,
                         int64_t dim, int64_t sb, int64_t sh, int64_t sl, int box_rows);

// Whether a variant gets the narrow kv tile (kernels/sm90/tile_config_sm90.h): its mods read captured
// buffers (and FLEXATTN_SM90_NARROW is not 0; read at each call: set it before the first forward). The
// one rule both the generated source and the launch (map boxes, mask blocks) follow.
bool sm90_narrow_tile(const codegen::VariantLayout& layout);

// Encodes one map into *out (the driver's cuTensorMapEncodeTiled). Throws Error naming `what` and the
// driver's message when the map is rejected, or when the driver has no cuTensorMapEncodeTiled.
void encode_sm90_map(const TmaMapArgs& a, const char* what, kern::TmaDesc* out);

// Encodes p->q_map, k_map, v_map, o_map from p's tensor fields (filled and validated by the caller).
// Throws Error naming the tensor and the driver's message when a map is rejected, or when the driver
// has no cuTensorMapEncodeTiled (CUDA < 12).
void encode_sm90_forward_maps(kern::AttnParams* p, DType dtype, bool narrow, int kernel_d, int kernel_dv);

// FLEXATTN_SM90 is not switched off (default on; read on every call; flags as in docs/env_vars.md).
bool sm90_forward_requested();

// FLEXATTN_SM90_ROW_ORDER (read on every call): `0` off (the natural tile order), `1` always (a block mask's
// q_order whenever it has one), unset / `auto` automatic: q_order where q_order_on says the natural order is not
// longest first (docs/env_vars.md). Anything else is an Error naming the variable.
enum class Sm90RowOrder { off, automatic, always };
Sm90RowOrder sm90_row_order_mode();
// Whether some mask (b, h)'s natural order (rows nq - 1 .. 0) is not longest first: a row with more kv blocks
// (partial + full) than the row after it. `full` may be null. What q_order_on says, computed on the host.
bool row_order_worth_it(const int32_t* num, const int32_t* full, int64_t BH, int64_t nq);

// The opt-in path declines a problem: prints "[flexattn sm90] using the sm80 kernels: <why>" to stderr
// when FLEXATTN_JIT_DEBUG is on, and returns false (the caller then runs the sm80 family).
bool sm90_decline(const std::string& why);

// Whether the sm90 forward can run this problem: arch "sm_90a", D and Dv in {64, 128, 192, 256},
// mask blocks (when a mask is given) multiples of the compute tile chosen with `narrow`. `why` gets
// the reason when not.
bool sm90_forward_supported(const std::string& arch, const kern::AttnParams& p, bool narrow,
                            std::string* why = nullptr);

// The generated source of an sm90 kernel set: the backward's, or the forward's (one entry, flexattn_fwd) in the
// form sm90_fwd_form reads now.
std::string kernel_source_sm90(const codegen::GeneratedVariant& variant, const KernelSetKey& key);
// The forward's source in a given form (get_kernel_set: the form it records in the set).
std::string kernel_source_sm90_fwd(const codegen::GeneratedVariant& variant, const KernelSetKey& key,
                                   const Sm90FwdForm& form);

// The form of a forward set of `key` (the switches read here, once per set): narrow per sm90_narrow_tile,
// persistent per FLEXATTN_SM90_PERSISTENT (default on), tall where key.sm90_fwd_tall asks, kern::sm90_fwd_tall_ok
// applies (D = Dv = 64, the variant's tile not narrow) and sm90_fwd_tall_suits the variant.
Sm90FwdForm sm90_fwd_form(const codegen::GeneratedVariant& variant, const KernelSetKey& key);

// Whether the tall tile is worth compiling for a variant: not for the exact softcap (its tall kernel spills at D = 64
// and fell back to the usual one after a wasted compile) nor for score mods that read captured buffers (t5 spills;
// the relative-bias gather compiles clean but ran no faster, H200 session 22: relbias_full D=64 1.674 / 1.682 ms
// usual / tall, and its tall compile took 2.5 s against 1.85 s here).
bool sm90_fwd_tall_suits(const codegen::GeneratedVariant& variant);

// Whether a forward call asks for the tall kernel: FLEXATTN_SM90_FWD_TALL on (the default since session 22), D = Dv = 64
// and no block mask (192-row tiles are not a multiple of the 128-row mask tile).
bool sm90_fwd_tall_requested(int d, int dv, bool block_mask);
// FLEXATTN_SM90_PAD_HEAD_DIM (default on): head dims between the compiled ones take the forward kernel of the next one
// up (kern::sm90_padded_head_dim); 0: they run on the sm80 family.
bool sm90_pad_head_dims_requested();
// The forward kernel's head dim for a call's d: d (64, 128, 192, 256), the padded dim unless the switch is off, else 0.
int sm90_fwd_head_dim(int d);
// The sm90 forward set a call asks for (try_sm90_forward), and so the one compile_variant prewarms: a different tile is
// another set, which the call would compile again. Its head dims are the kernel's (sm90_fwd_head_dim).
KernelSetKey sm90_fwd_call_key(DType dtype, int d, int dv, const std::string& arch, bool block_mask);

}  // namespace flexattn::runtime
