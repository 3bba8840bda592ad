#pragma once
// Paged K/V cache, host side: page bookkeeping (PageAllocator, like torch's experimental
// PagedAttention: reserve / append / erase per sequence, a free list, a page table) and the CPU
// reference of paged decoding (gather the pages back into contiguous K/V, then the ordinary oracle).
// The device side is include/flexattn/decode.h; the page table this class keeps is what it reads.
#include <cstdint>
#include <vector>

#include "flexattn/reference.h"
#include "flexattn/tensor.h"

namespace flexattn {

// Pages of a pool [num_pages, Hkv, page_size, D] handed to sequences (slots 0..max_batch-1). The page
// table is int32 [max_batch, max_pages_per_seq], -1 where unmapped; logical position j of sequence s
// lives in page page_table[s][j / page_size], row j % page_size. Not thread-safe.
class PageAllocator {
 public:
  // Throws Error, naming the argument, for sizes < 1, page_size > 256, num_pages >= 2^31,
  // max_pages_per_seq * page_size >= 2^31 or max_batch * max_pages_per_seq >= 2^31.
  PageAllocator(int64_t num_pages, int64_t page_size, int64_t max_batch, int64_t max_pages_per_seq);

  // Grows sequence `seq`'s capacity to at least `length` tokens with whole pages from the free list
  // (never shrinks). Throws Error, changing nothing, when the pool or the page-table row is too small.
  void reserve(int64_t seq, int64_t length);
  // reserve(length + tokens), then length += tokens; returns the position of the first new token.
  int64_t append(int64_t seq, int64_t tokens);
  // Returns every page of `seq` to the free list; its length and capacity become 0.
  void erase(int64_t seq);

  int64_t length(int64_t seq) const;
  int64_t capacity(int64_t seq) const;  // mapped pages x page_size
  int64_t free_pages() const { return int64_t(free_.size()); }
  // Physical page and row of logical position pos < capacity(seq); throws Error otherwise.
  int64_t physical_page(int64_t seq, int64_t pos) const;
  int64_t physical_row(int64_t seq, int64_t pos) const { return pos % page_size_; }

  const std::vector<int32_t>& page_table() const { return table_; }
  std::vector<int32_t> lengths() const;  // int32 [max_batch], the kv_lens a decode call takes
  int64_t num_pages() const { return num_pages_; }
  int64_t page_size() const { return page_size_; }
  int64_t max_batch() const { return max_batch_; }
  int64_t max_pages_per_seq() const { return max_pages_; }

 private:
  void check_seq(int64_t seq) const;
  void grow(int64_t seq, int64_t length, const char* what);  // reserve's body; `what` names the caller in errors
  int64_t num_pages_, page_size_, max_batch_, max_pages_;
  std::vector<int32_t> table_;
  std::vector<int64_t> len_, mapped_;
  std::vector<int32_t> free_;  // popped from the back: lowest ids first
};

namespace cpu {

// Pages to contiguous rows: pool [num_pages, Hkv, page_size, D] -> [B, Hkv, max_len, D] (the pool's
// dtype); row j of sequence b is pool[page_table[b * max_pages + j / page_size], :, j % page_size] for
// j < kv_lens[b], zero past it. A page id outside [0, num_pages) below kv_lens[b]: with `unmapped`, the row
// stays zero and (*unmapped)[b * max_len + j] is 1 (the vector is resized to [B, max_len]); without it, Error.
HostTensor gather_pages(const HostTensor& pool, const std::vector<int32_t>& page_table, int64_t max_pages,
                        const std::vector<int32_t>& kv_lens, int64_t max_len,
                        std::vector<uint8_t>* unmapped = nullptr);

// A decode call as the oracle sees it. page_table empty: k / v are contiguous [Bkv, Hkv, S, D].
struct DecodeReference {
  std::vector<int32_t> page_table;  // [B, max_pages]
  int64_t max_pages = 0;
  std::vector<int32_t> kv_lens;    // [B]; empty = all of S (contiguous) / max_pages * page_size
  std::vector<int32_t> q_offsets;  // [B]; empty = q_offset
  int64_t q_offset = 0;
};

// The decode semantics of include/flexattn/decode.h on the CPU: the mods see logical positions
// (q_offsets[b] + i, kv), kv >= kv_lens[b] and kv rows on a page id outside the pool are masked (as the
// kernels mask them), the mask is applied densely through mask_mod
// (a block mask built from mask_mod gives the same result). Fully masked rows: out 0, lse = max = -inf.
// options.block_mask must be null.
ForwardResult decode_forward(const HostTensor& q, const HostTensor& k, const HostTensor& v,
                             const DecodeReference& decode, const ModFns& mods, const Options& options = {});

}  // namespace cpu

}  // namespace flexattn
