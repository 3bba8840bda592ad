// PageAllocator: reserve / append / erase bookkeeping, the page table it exposes, and its errors.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <set>
#include <string>

#include "flexattn/error.h"
#include "flexattn/paged.h"

using flexattn::Error;
using flexattn::PageAllocator;

TEST(PageAllocator, AppendMapsWholePagesInOrder) {
  PageAllocator a(8, 16, 2, 4);
  EXPECT_EQ(a.append(0, 1), 0);
  EXPECT_EQ(a.capacity(0), 16);
  EXPECT_EQ(a.append(0, 15), 1);
  EXPECT_EQ(a.capacity(0), 16);
  EXPECT_EQ(a.append(0, 1), 16);
  EXPECT_EQ(a.capacity(0), 32);
  EXPECT_EQ(a.length(0), 17);
  EXPECT_EQ(a.free_pages(), 6);
  EXPECT_EQ(a.page_table()[0], 0);
  EXPECT_EQ(a.page_table()[1], 1);
  EXPECT_EQ(a.page_table()[2], -1);
  EXPECT_EQ(a.physical_page(0, 16), 1);
  EXPECT_EQ(a.physical_row(0, 17), 1);
  EXPECT_EQ(a.lengths(), (std::vector<int32_t>{17, 0}));
}

TEST(PageAllocator, InterleavedSequencesNeverSharePages) {
  PageAllocator a(64, 3, 4, 16);
  for (int step = 0; step < 40; ++step)
    for (int s = 0; s < 4; ++s) a.append(s, 1);
  std::set<int32_t> seen;
  for (int s = 0; s < 4; ++s)
    for (int64_t j = 0; j < a.capacity(s) / 3; ++j) {
      const int32_t p = a.page_table()[size_t(s * 16 + j)];
      ASSERT_GE(p, 0);
      ASSERT_TRUE(seen.insert(p).second) << "page " << p << " handed out twice";
    }
  EXPECT_EQ(int64_t(seen.size()) + a.free_pages(), 64);
}

TEST(PageAllocator, EraseReturnsPagesForReuse) {
  PageAllocator a(4, 8, 2, 4);
  a.reserve(0, 32);
  EXPECT_EQ(a.free_pages(), 0);
  EXPECT_THROW(a.append(1, 1), Error);
  a.erase(0);
  EXPECT_EQ(a.free_pages(), 4);
  EXPECT_EQ(a.length(0), 0);
  EXPECT_EQ(a.capacity(0), 0);
  EXPECT_EQ(a.page_table()[0], -1);
  EXPECT_EQ(a.append(1, 9), 0);
  EXPECT_EQ(a.page_table()[4], 0);  // lowest ids first again
  EXPECT_EQ(a.page_table()[5], 1);
}

TEST(PageAllocator, ReserveNeverShrinksAndFailsAtomically) {
  PageAllocator a(3, 4, 1, 8);
  a.reserve(0, 8);
  a.reserve(0, 2);
  EXPECT_EQ(a.capacity(0), 8);
  EXPECT_THROW(a.reserve(0, 20), Error);  // needs 3 more pages, 1 free
  EXPECT_EQ(a.capacity(0), 8);
  EXPECT_EQ(a.free_pages(), 1);
  EXPECT_EQ(a.length(0), 0);  // reserve does not change the length
}

TEST(PageAllocator, ErrorsNameTheArgument) {
  EXPECT_THROW(PageAllocator(0, 16, 1, 1), Error);
  EXPECT_THROW(PageAllocator(4, 257, 1, 1), Error);
  PageAllocator a(4, 16, 2, 2);
  EXPECT_THROW(a.append(2, 1), Error);
  EXPECT_THROW(a.append(0, -1), Error);
  EXPECT_THROW(a.reserve(0, 33), Error);  // more than max_pages_per_seq
  EXPECT_THROW(a.physical_page(0, 0), Error);
  try {
    a.append(5, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "seq: expected 0..1, got 5");
  }
}

namespace {
std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

// Sizes near 2^63 used to wrap in the rounding (length + page_size - 1) and in append's first + tokens: reserve
// returned with nothing mapped, append blamed an argument named "length". Both now fail like any too-long request,
// and leave the allocator as it was.
TEST(PageAllocator, HugeLengthsFailCleanlyWithoutWrapping) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  PageAllocator a(8, 16, 2, 4);
  EXPECT_EQ(a.append(0, 5), 0);
  for (int64_t length : {kMax, kMax - 1, kMax - 14, kMax - 16})
    EXPECT_EQ(message_of([&] { a.reserve(0, length); }).rfind("reserve: sequence 0 needs ", 0), 0u) << length;
  EXPECT_EQ(message_of([&] { a.append(0, kMax); }),
            "append: sequence 0 holds 5 tokens; 9223372036854775807 more exceed max_pages_per_seq * page_size (64)");
  EXPECT_EQ(message_of([&] { a.append(0, 60); }),
            "append: sequence 0 holds 5 tokens; 60 more exceed max_pages_per_seq * page_size (64)");
  EXPECT_EQ(a.length(0), 5);
  EXPECT_EQ(a.capacity(0), 16);
  EXPECT_EQ(a.free_pages(), 7);
  EXPECT_EQ(a.append(0, 59), 5);  // exactly the row's capacity still fits
  EXPECT_EQ(a.capacity(0), 64);
}

TEST(PageAllocator, AppendErrorsNameAppend) {
  PageAllocator a(2, 4, 2, 8);
  a.append(0, 8);
  EXPECT_EQ(message_of([&] { a.append(1, 9); }), "append: sequence 1 needs 3 more pages but only 0 are free");
  EXPECT_EQ(message_of([&] { a.reserve(1, 9); }), "reserve: sequence 1 needs 3 more pages but only 0 are free");
}

// The size checks divide instead of multiplying, so sizes whose product wraps (2^56 x 256 = 2^64) are refused by
// name instead of reaching std::vector (bad_alloc, or a length error naming no argument).
TEST(PageAllocator, SizesWhoseProductWrapsAreRefusedByName) {
  EXPECT_EQ(message_of([] { PageAllocator(8, 256, 1, int64_t(1) << 56); }),
            "max_pages_per_seq: expected 1.. with max_pages_per_seq * page_size < 2^31, got 72057594037927936");
  EXPECT_EQ(message_of([] { PageAllocator(4, 16, int64_t(1) << 62, 4); }),
            "max_batch: expected 1.. with max_batch * max_pages_per_seq < 2^31 (the page table's entries), got "
            "4611686018427387904");
  EXPECT_EQ(message_of([] { PageAllocator(4, 1, int64_t(1) << 40, 1); }).rfind("max_batch: ", 0), 0u);
  EXPECT_EQ(message_of([] { PageAllocator(4, 1, 0, 1); }).rfind("max_batch: ", 0), 0u);
  EXPECT_NO_THROW(PageAllocator(4, 256, 1, ((int64_t(1) << 31) - 1) / 256));
  EXPECT_THROW(PageAllocator(4, 256, 1, ((int64_t(1) << 31) - 1) / 256 + 1), Error);
}
