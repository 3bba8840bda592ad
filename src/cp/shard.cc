// Sub-problems of a sharded attention: mods with position offsets, block-mask tiles, sequence slices.
#include <cstring>
#include <string>

#include "cp/shape_util.h"
#include "flexattn/cp.h"

namespace flexattn::cp {

cpu::ModFns offset_mods(const cpu::ModFns& mods, int64_t q_offset, int64_t kv_offset) {
  cpu::ModFns m;
  const int64_t qo = q_offset, ko = kv_offset;
  if (mods.score_mod)
    m.score_mod = [f = mods.score_mod, qo, ko](double s, int64_t b, int64_t h, int64_t q, int64_t kv) {
      return f(s, b, h, q + qo, kv + ko);
    };
  if (mods.mask_mod)
    m.mask_mod = [f = mods.mask_mod, qo, ko](int64_t b, int64_t h, int64_t q, int64_t kv) {
      return f(b, h, q + qo, kv + ko);
    };
  if (mods.score_grad)
    m.score_grad = [f = mods.score_grad, qo, ko](double s, int64_t b, int64_t h, int64_t q, int64_t kv, double g) {
      return f(s, b, h, q + qo, kv + ko, g);
    };
  if (mods.buffer_grad)
    m.buffer_grad = [f = mods.buffer_grad, qo, ko](int thread, double s, int64_t b, int64_t h, int64_t q, int64_t kv,
                                                   double g) { f(thread, s, b, h, q + qo, kv + ko, g); };
  return m;
}

BlockMask slice_blocks(const BlockMask& bm, int64_t q_block_begin, int64_t q_block_end, int64_t kv_block_begin,
                       int64_t kv_block_end) {
  const std::vector<uint8_t> cls = [&] {
    try {
      return to_dense(bm);
    } catch (const Error& e) {
      throw Error(std::string("slice_blocks: bm is malformed: ") + e.what());
    }
  }();
  const auto check_range = [](const char* what, int64_t begin, int64_t end, int64_t n, const char* n_name) {
    check(0 <= begin && begin < end && end <= n,
          std::string("slice_blocks: ") + what + " block range must satisfy 0 <= begin < end <= " + n_name + " = " +
              std::to_string(n) + "; got [" + std::to_string(begin) + ", " + std::to_string(end) + ")");
  };
  check_range("query", q_block_begin, q_block_end, bm.nq, "nq");
  check_range("kv", kv_block_begin, kv_block_end, bm.nkv, "nkv");
  const int64_t nq = q_block_end - q_block_begin, nkv = kv_block_end - kv_block_begin;
  const int64_t rows = bm.B * bm.H * nq;
  std::vector<int32_t> num(size_t(rows), 0), idx(size_t(rows * nkv), 0);
  std::vector<int32_t> full_num(size_t(rows), 0), full_idx(size_t(rows * nkv), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t bh = r / nq, qb = q_block_begin + r % nq;
    const uint8_t* row = &cls[size_t((bh * bm.nq + qb) * bm.nkv)];
    for (int64_t c = 0; c < nkv; ++c) {
      const uint8_t k = row[kv_block_begin + c];
      if (k == kBlockPartial) idx[size_t(r * nkv + num[size_t(r)]++)] = int32_t(c);
      if (k == kBlockFull) full_idx[size_t(r * nkv + full_num[size_t(r)]++)] = int32_t(c);
    }
  }
  // A range that reaches the end keeps the tail tile, so it covers fewer than whole blocks.
  const int64_t q_len = std::min(bm.q_len, q_block_end * bm.q_block) - q_block_begin * bm.q_block;
  const int64_t kv_len = std::min(bm.kv_len, kv_block_end * bm.kv_block) - kv_block_begin * bm.kv_block;
  return from_kv_blocks(num, idx, bm.has_full ? &full_num : nullptr, bm.has_full ? &full_idx : nullptr, bm.B,
                        bm.H, nq, nkv, bm.q_block, bm.kv_block, q_len, kv_len);
}

HostTensor slice_seq(const HostTensor& t, int64_t begin, int64_t end) {
  check(t.shape.size() == 3 || t.shape.size() == 4,
        "slice_seq: t must be a 3-D [B, H, L] or 4-D [B, H, L, D] tensor; got rank " +
            std::to_string(t.shape.size()) + " " + shape_string(t.shape));
  detail::check_tensor(t, "slice_seq: t", t.shape.size(), t.shape.size() == 3 ? "[B, H, L]" : "[B, H, L, D]");
  const int64_t L = t.shape[2];
  check(0 <= begin && begin <= end && end <= L, "slice_seq: the range must satisfy 0 <= begin <= end <= L = " +
                                                    std::to_string(L) + "; got [" + std::to_string(begin) + ", " +
                                                    std::to_string(end) + ")");
  std::vector<int64_t> shape = t.shape;
  shape[2] = end - begin;
  HostTensor out(t.dtype, shape);
  const int64_t inner = t.shape.size() == 4 ? t.shape[3] : 1, es = dtype_size(t.dtype);
  const size_t bytes = size_t((end - begin) * inner * es);
  for (int64_t bh = 0; bh < t.shape[0] * t.shape[1]; ++bh)
    if (bytes)
      std::memcpy(&out.bytes[size_t(bh * (end - begin) * inner * es)], &t.bytes[size_t((bh * L + begin) * inner * es)],
                  bytes);
  return out;
}

}  // namespace flexattn::cp
