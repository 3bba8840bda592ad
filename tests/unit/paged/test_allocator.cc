// PageAllocator: reserve / append / erase bookkeeping, the page table it exposes, and its errors.
#include <gtest/gtest.h>

#include <set>

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
