#pragma once
// Host side of the decode family's TMA ring (FLEXATTN_DECODE_TMA; kernels/decode/decode_tma.cuh): which calls the
// _tma entries take, and their K / V tensor maps.
#include <string>

#include "flexattn/dtype.h"
#include "runtime/tma_sm90.h"

namespace flexattn::kern {
struct AttnParams;
}

namespace flexattn::runtime {

// Whether a call (p filled by the decode checks) can take the _tma entries: a contiguous cache (a paged one keeps the
// bulk rows), head dims of whole 64-column boxes, and K / V views a tensor map can describe (16-byte aligned data,
// strides of multiples of 8 elements). *why, when not.
bool decode_tma_fits(const kern::AttnParams& p, DType dtype, std::string* why = nullptr);

// How the maps cut K and V (the kernels' boxes must match: the tuned FLEXATTN_DECODE_TMA_BOX / _WHOLE of the source).
// rows: box rows (kern::decode_tma_box_rows of FLEXATTN_DECODE_TMA_BOX); whole (FLEXATTN_DECODE_TMA_WHOLE): boxes of
// whole rows; l2_bytes (FLEXATTN_DECODE_TMA_L2, host only): the maps' L2 promotion, 0 (none), 64, 128 or 256 bytes.
struct DecodeTmaBoxes {
  int rows = 64;
  bool whole = false;
  int l2_bytes = 128;
};
// The boxes of the tuned source and launch (decode_tuning()) at head dims (d, dv).
DecodeTmaBoxes decode_tma_boxes(int d, int dv);

// The maps' arguments: K's or V's [Bkv, Hkv, S, dim] view in boxes of 64 columns x boxes.rows rows, 128-byte swizzle,
// zero fill past S. boxes.whole: the same view as 5-D, (64 columns, dim / 64 pieces, S, Hkv, Bkv), in boxes of whole
// rows (64, dim / 64, rows, 1, 1).
TmaMapArgs decode_tma_map_args(const kern::AttnParams& p, DType dtype, bool value, const DecodeTmaBoxes& boxes);

// Whether two maps' arguments describe the same map (every field cuTensorMapEncodeTiled reads).
bool same_tma_map_args(const TmaMapArgs& a, const TmaMapArgs& b);

// Encodes p->k_map and p->v_map cut in `boxes`; false, with the reason in *why, when the call cannot take the _tma
// entries (decode_tma_fits' reasons, checked here too) or the driver rejects a map (the call then takes the bulk-row
// entries). A decode loop calls with the same cache every step: the
// maps of this thread's last call are reused when their arguments are the same (same_tma_map_args), so a step costs no
// cuTensorMapEncodeTiled.
bool encode_decode_tma_maps(kern::AttnParams* p, DType dtype, const DecodeTmaBoxes& boxes, std::string* why);

}  // namespace flexattn::runtime
