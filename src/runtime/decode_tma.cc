#include "runtime/decode_tma.h"

#include "common/params.h"
#include "decode/decode_config.h"
#include "flexattn/error.h"
#include "runtime/decode_source.h"

namespace flexattn::runtime {

DecodeTmaBoxes decode_tma_boxes(int d, int dv) {
  const DecodeTuning& t = decode_tuning();
  return DecodeTmaBoxes{kern::decode_tma_box_rows(d, dv, t.tma_box), t.tma_whole, t.tma_l2};
}

TmaMapArgs decode_tma_map_args(const kern::AttnParams& p, DType dtype, bool value, const DecodeTmaBoxes& boxes) {
  const int box_rows = boxes.rows;
  TmaMapArgs a = value ? sm90_map_args("v", p.v, dtype, p.Bkv, p.Hkv, p.S, p.Dv, p.v_sb, p.v_sh, p.v_sl, box_rows)
                       : sm90_map_args("k", p.k, dtype, p.Bkv, p.Hkv, p.S, p.D, p.k_sb, p.k_sh, p.k_sl, box_rows);
  // CU_TENSOR_MAP_L2_PROMOTION_NONE, _L2_64B, _L2_128B, _L2_256B
  a.l2_promotion = boxes.l2_bytes == 0 ? 0 : boxes.l2_bytes == 64 ? 1 : boxes.l2_bytes == 256 ? 3 : 2;
  if (!boxes.whole) return a;
  const uint64_t dim = a.dims[0];
  if (dim % 64 != 0)
    throw Error(std::string(value ? "v" : "k") + ": whole-row TMA boxes take head dims of whole 64-column pieces, got " +
                std::to_string(dim));
  // (64, pieces, rows, heads, batch): a piece is the next 128 bytes of its row.
  a.rank = 5;
  a.dims[4] = a.dims[3], a.dims[3] = a.dims[2], a.dims[2] = a.dims[1], a.dims[1] = dim / 64, a.dims[0] = 64;
  a.strides[3] = a.strides[2], a.strides[2] = a.strides[1], a.strides[1] = a.strides[0], a.strides[0] = 128;
  a.box[0] = 64, a.box[1] = uint32_t(dim / 64), a.box[2] = uint32_t(box_rows), a.box[3] = 1, a.box[4] = 1;
  return a;
}

namespace {

// The checks of a call's cache that need no map: contiguous, head dims the _tma entries take.
bool decode_tma_layout_fits(const kern::AttnParams& p, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why != nullptr) *why = reason;
    return false;
  };
  if (p.page_table != nullptr) return no("a paged cache (the TMA ring loads contiguous caches)");
  if (!kern::decode_tma_dims(p.D, p.Dv))
    return no("head dims D=" + std::to_string(p.D) + ", Dv=" + std::to_string(p.Dv) +
              " (the TMA ring takes multiples of 64 up to 128)");
  return true;
}

}  // namespace

bool decode_tma_fits(const kern::AttnParams& p, DType dtype, std::string* why) {
  if (!decode_tma_layout_fits(p, why)) return false;
  try {
    decode_tma_map_args(p, dtype, false, DecodeTmaBoxes{16});  // the box does not change what a map can describe
    decode_tma_map_args(p, dtype, true, DecodeTmaBoxes{16});
  } catch (const Error& e) {
    if (why != nullptr) *why = e.what();
    return false;
  }
  return true;
}

bool same_tma_map_args(const TmaMapArgs& a, const TmaMapArgs& b) {
  bool same = a.data_type == b.data_type && a.rank == b.rank && a.address == b.address && a.interleave == b.interleave &&
              a.swizzle == b.swizzle && a.l2_promotion == b.l2_promotion && a.oob_fill == b.oob_fill;
  for (int i = 0; i < 5; ++i)
    same = same && a.dims[i] == b.dims[i] && a.box[i] == b.box[i] && a.element_strides[i] == b.element_strides[i];
  for (int i = 0; i < 4; ++i) same = same && a.strides[i] == b.strides[i];
  return same;
}

bool encode_decode_tma_maps(kern::AttnParams* p, DType dtype, const DecodeTmaBoxes& boxes, std::string* why) {
  if (!decode_tma_layout_fits(*p, why)) return false;  // the map arguments' own checks throw, caught below
  struct Last {
    bool valid = false;
    TmaMapArgs args;
    kern::TmaDesc map;
  };
  thread_local Last last[2];  // K, V
  auto encode = [&](bool value, kern::TmaDesc* out) {
    const TmaMapArgs a = decode_tma_map_args(*p, dtype, value, boxes);
    Last& l = last[value ? 1 : 0];
    if (!l.valid || !same_tma_map_args(l.args, a)) {
      l.valid = false;
      encode_sm90_map(a, value ? "v" : "k", &l.map);
      l.args = a, l.valid = true;
    }
    *out = l.map;
  };
  try {
    encode(false, &p->k_map);
    encode(true, &p->v_map);
  } catch (const Error& e) {
    if (why != nullptr) *why = e.what();
    return false;
  }
  return true;
}

}  // namespace flexattn::runtime
