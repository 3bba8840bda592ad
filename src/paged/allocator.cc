// Page bookkeeping of a paged K/V cache (include/flexattn/paged.h).
#include <string>

#include "flexattn/error.h"
#include "flexattn/paged.h"

namespace flexattn {

PageAllocator::PageAllocator(int64_t num_pages, int64_t page_size, int64_t max_batch, int64_t max_pages_per_seq)
    : num_pages_(num_pages), page_size_(page_size), max_batch_(max_batch), max_pages_(max_pages_per_seq) {
  constexpr int64_t kLimit = int64_t(1) << 31;
  if (num_pages < 1 || num_pages >= kLimit)
    throw Error("num_pages: expected 1..2^31-1, got " + std::to_string(num_pages));
  if (page_size < 1 || page_size > 256) throw Error("page_size: expected 1..256, got " + std::to_string(page_size));
  // Divided, not multiplied: a product of two huge sizes would wrap past the check.
  if (max_pages_per_seq < 1 || max_pages_per_seq > (kLimit - 1) / page_size)
    throw Error("max_pages_per_seq: expected 1.. with max_pages_per_seq * page_size < 2^31, got " +
                std::to_string(max_pages_per_seq));
  // The page table holds max_batch * max_pages_per_seq int32 entries.
  if (max_batch < 1 || max_batch > (kLimit - 1) / max_pages_per_seq)
    throw Error("max_batch: expected 1.. with max_batch * max_pages_per_seq < 2^31 (the page table's entries), got " +
                std::to_string(max_batch));
  table_.assign(size_t(max_batch * max_pages_per_seq), -1);
  len_.assign(size_t(max_batch), 0);
  mapped_.assign(size_t(max_batch), 0);
  free_.reserve(size_t(num_pages));
  for (int64_t p = num_pages - 1; p >= 0; --p) free_.push_back(int32_t(p));
}

void PageAllocator::check_seq(int64_t seq) const {
  if (seq < 0 || seq >= max_batch_)
    throw Error("seq: expected 0.." + std::to_string(max_batch_ - 1) + ", got " + std::to_string(seq));
}

void PageAllocator::reserve(int64_t seq, int64_t length) {
  check_seq(seq);
  if (length < 0) throw Error("length: must be >= 0, got " + std::to_string(length));
  grow(seq, length, "reserve");
}

void PageAllocator::grow(int64_t seq, int64_t length, const char* what) {
  // Rounded up without length + page_size - 1, which wraps for lengths near 2^63.
  const int64_t need = length / page_size_ + (length % page_size_ != 0 ? 1 : 0);
  if (need <= mapped_[seq]) return;
  if (need > max_pages_)
    throw Error(std::string(what) + ": sequence " + std::to_string(seq) + " needs " + std::to_string(need) +
                " pages, more than max_pages_per_seq (" + std::to_string(max_pages_) + ")");
  if (need - mapped_[seq] > free_pages())
    throw Error(std::string(what) + ": sequence " + std::to_string(seq) + " needs " +
                std::to_string(need - mapped_[seq]) + " more pages but only " + std::to_string(free_pages()) +
                " are free");
  for (int64_t j = mapped_[seq]; j < need; ++j) {
    table_[size_t(seq * max_pages_ + j)] = free_.back();
    free_.pop_back();
  }
  mapped_[seq] = need;
}

int64_t PageAllocator::append(int64_t seq, int64_t tokens) {
  check_seq(seq);
  if (tokens < 0) throw Error("tokens: must be >= 0, got " + std::to_string(tokens));
  const int64_t first = len_[seq], most = max_pages_ * page_size_;
  // first <= most < 2^31, so most - first cannot wrap (first + tokens could).
  if (tokens > most - first)
    throw Error("append: sequence " + std::to_string(seq) + " holds " + std::to_string(first) + " tokens; " +
                std::to_string(tokens) + " more exceed max_pages_per_seq * page_size (" + std::to_string(most) + ")");
  grow(seq, first + tokens, "append");
  len_[seq] = first + tokens;
  return first;
}

void PageAllocator::erase(int64_t seq) {
  check_seq(seq);
  // Back in reverse so the next reserve hands out this sequence's pages in their old order.
  for (int64_t j = mapped_[seq] - 1; j >= 0; --j) {
    int32_t& slot = table_[size_t(seq * max_pages_ + j)];
    free_.push_back(slot);
    slot = -1;
  }
  mapped_[seq] = 0;
  len_[seq] = 0;
}

int64_t PageAllocator::length(int64_t seq) const {
  check_seq(seq);
  return len_[seq];
}

int64_t PageAllocator::capacity(int64_t seq) const {
  check_seq(seq);
  return mapped_[seq] * page_size_;
}

int64_t PageAllocator::physical_page(int64_t seq, int64_t pos) const {
  check_seq(seq);
  if (pos < 0 || pos >= capacity(seq))
    throw Error("pos: " + std::to_string(pos) + " is outside sequence " + std::to_string(seq) + "'s " +
                std::to_string(capacity(seq)) + " reserved positions");
  return table_[size_t(seq * max_pages_ + pos / page_size_)];
}

std::vector<int32_t> PageAllocator::lengths() const { return std::vector<int32_t>(len_.begin(), len_.end()); }

}  // namespace flexattn
