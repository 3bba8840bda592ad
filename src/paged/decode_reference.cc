// The paged-decode oracle: gather, then the ordinary CPU reference with the mods moved to logical
// positions (include/flexattn/paged.h).
#include <algorithm>
#include <cstring>
#include <string>

#include "flexattn/error.h"
#include "flexattn/paged.h"

namespace flexattn::cpu {

HostTensor gather_pages(const HostTensor& pool, const std::vector<int32_t>& page_table, int64_t max_pages,
                        const std::vector<int32_t>& kv_lens, int64_t max_len, std::vector<uint8_t>* unmapped) {
  if (pool.shape.size() != 4) throw Error("pool: expected [num_pages, Hkv, page_size, D]");
  const int64_t P = pool.shape[0], H = pool.shape[1], ps = pool.shape[2], D = pool.shape[3];
  for (int64_t d : pool.shape)
    if (d < 0) throw Error("pool: negative dimension in shape " + pool.shape_string());
  if (ps < 1) throw Error("pool: page_size (shape[2]) must be >= 1; got " + std::to_string(ps));
  pool.check_byte_size("pool");  // the copies below trust the shape
  if (max_len < 0) throw Error("max_len must be >= 0; got " + std::to_string(max_len));
  const int64_t B = int64_t(kv_lens.size());
  if (max_pages < 1 || int64_t(page_table.size()) / max_pages != B || int64_t(page_table.size()) % max_pages != 0)
    throw Error("page_table: expected " + std::to_string(B) + " x max_pages = " + std::to_string(B) + " x " +
                std::to_string(max_pages) + " entries; got " + std::to_string(page_table.size()));
  HostTensor out(pool.dtype, {B, H, max_len, D});
  if (unmapped != nullptr) unmapped->assign(size_t(B * max_len), 0);
  const size_t es = size_t(dtype_size(pool.dtype)), row = size_t(D) * es;
  for (int64_t b = 0; b < B; ++b) {
    if (kv_lens[b] < 0 || kv_lens[b] > max_len || kv_lens[b] > max_pages * ps)
      throw Error("kv_lens[" + std::to_string(b) + "] = " + std::to_string(kv_lens[b]) + " is outside [0, " +
                  std::to_string(std::min<int64_t>(max_len, max_pages * ps)) + "] (max_len " + std::to_string(max_len) +
                  ", max_pages x page_size " + std::to_string(max_pages * ps) + ")");
    for (int64_t j = 0; j < kv_lens[b]; ++j) {
      const int32_t page = page_table[size_t(b * max_pages + j / ps)];
      if ((page < 0 || page >= P) && unmapped != nullptr) {
        (*unmapped)[size_t(b * max_len + j)] = 1;
        continue;
      }
      if (page < 0 || page >= P)
        throw Error("page_table: sequence " + std::to_string(b) + " position " + std::to_string(j) +
                    " maps to page " + std::to_string(page) + " (pool of " + std::to_string(P) + ")");
      for (int64_t h = 0; h < H; ++h)
        std::memcpy(out.bytes.data() + size_t(((b * H + h) * max_len + j)) * row,
                    pool.bytes.data() + size_t(((page * H + h) * ps + j % ps)) * row, row);
    }
  }
  return out;
}

ForwardResult decode_forward(const HostTensor& q, const HostTensor& k, const HostTensor& v,
                             const DecodeReference& d, const ModFns& mods, const Options& options) {
  if (options.block_mask != nullptr) throw Error("decode_forward: the mask is applied through mask_mod only");
  if (q.shape.size() != 4 || k.shape.size() != 4 || v.shape.size() != 4) throw Error("q, k, v: expected 4-D");
  const int64_t B = q.shape[0];
  const bool paged = !d.page_table.empty();
  if (paged && (v.shape[0] != k.shape[0] || v.shape[1] != k.shape[1] || v.shape[2] != k.shape[2]))
    throw Error("v pool " + v.shape_string() + " must match the k pool " + k.shape_string() +
                " in [num_pages, Hkv, page_size]: one page table addresses both");
  // As cuda_decode: positions stay far from int64 overflow (the mods see q_offset + i).
  if (d.q_offset < 0 || d.q_offset >= (int64_t(1) << 30) - q.shape[2])
    throw Error("q_offset: must be in [0, 2^30 - L); got " + std::to_string(d.q_offset));
  const int64_t cap = paged ? d.max_pages * k.shape[2] : k.shape[2];
  std::vector<int32_t> lens = d.kv_lens;
  if (lens.empty()) lens.assign(size_t(B), int32_t(cap));
  if (int64_t(lens.size()) != B) throw Error("kv_lens: expected " + std::to_string(B) + " entries");
  for (int32_t& l : lens) l = l < 0 ? 0 : (l > cap ? int32_t(cap) : l);
  std::vector<int64_t> off(size_t(B), d.q_offset);
  if (!d.q_offsets.empty()) {
    if (int64_t(d.q_offsets.size()) != B) throw Error("q_offsets: expected " + std::to_string(B) + " entries");
    // the kernels' clamp (attn_decode.cuh): into [0, 2^30 - L], so position-dependent mods see the same positions
    const int64_t top = (int64_t(1) << 30) - q.shape[2];
    for (int64_t b = 0; b < B; ++b) off[b] = std::clamp<int64_t>(d.q_offsets[b], 0, top);
  }
  HostTensor kc, vc;
  std::vector<uint8_t> unmapped, v_unmapped;  // [B, cap]: rows on a page outside the pool, masked as the kernels do
  if (paged) {
    kc = gather_pages(k, d.page_table, d.max_pages, lens, cap, &unmapped);
    vc = gather_pages(v, d.page_table, d.max_pages, lens, cap, &v_unmapped);  // the same rows: one table
  }
  ModFns m;
  if (mods.score_mod)
    m.score_mod = [&](double s, int64_t b, int64_t h, int64_t i, int64_t kv) {
      return mods.score_mod(s, b, h, i + off[b], kv);
    };
  m.mask_mod = [&](int64_t b, int64_t h, int64_t i, int64_t kv) {
    return kv < lens[b] && (unmapped.empty() || !unmapped[size_t(b * cap + kv)]) &&
           (!mods.mask_mod || mods.mask_mod(b, h, i + off[b], kv));
  };
  return forward(q, paged ? kc : k, paged ? vc : v, m, options);
}

}  // namespace flexattn::cpu
