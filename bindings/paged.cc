// PageAllocator (include/flexattn/paged.h) for Python: host bookkeeping of a paged K/V cache. The page
// table and lengths come back as int32 lists, ready for torch.tensor(..., dtype=torch.int32).
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "flexattn/paged.h"

namespace flexattn::py {

void bind_paged(nb::module_& m) {
  nb::class_<PageAllocator>(m, "PageAllocator",
                            "Pages of a pool [num_pages, Hkv, page_size, D] handed to sequences 0..max_batch-1; "
                            "page_table is int32 [max_batch, max_pages_per_seq], -1 where unmapped.")
      .def(nb::init<int64_t, int64_t, int64_t, int64_t>(), nb::arg("num_pages"), nb::arg("page_size"),
           nb::arg("max_batch"), nb::arg("max_pages_per_seq"))
      .def("reserve", &PageAllocator::reserve, nb::arg("seq"), nb::arg("length"),
           "Grow seq's capacity to at least length tokens (whole pages from the free list).")
      .def("append", &PageAllocator::append, nb::arg("seq"), nb::arg("tokens"),
           "Reserve and extend seq by tokens; returns the position of the first new token.")
      .def("erase", &PageAllocator::erase, nb::arg("seq"), "Return every page of seq to the free list.")
      .def("length", &PageAllocator::length, nb::arg("seq"))
      .def("capacity", &PageAllocator::capacity, nb::arg("seq"))
      .def("physical_page", &PageAllocator::physical_page, nb::arg("seq"), nb::arg("pos"))
      .def_prop_ro("free_pages", &PageAllocator::free_pages)
      .def_prop_ro("num_pages", &PageAllocator::num_pages)
      .def_prop_ro("page_size", &PageAllocator::page_size)
      .def_prop_ro("max_batch", &PageAllocator::max_batch)
      .def_prop_ro("max_pages_per_seq", &PageAllocator::max_pages_per_seq)
      .def("page_table", &PageAllocator::page_table, "int32 list, row-major [max_batch, max_pages_per_seq]")
      .def("lengths", &PageAllocator::lengths, "int32 list [max_batch]: the kv_lens of a decode call")
      // A list of a large table costs a Python int per entry (256 x 8192: 13 ms, and 126 ms more for torch.tensor of
      // it); its bytes are one copy, which flexattn.paged wraps as a numpy array.
      .def("page_table_bytes",
           [](const PageAllocator& a) {
             const std::vector<int32_t>& t = a.page_table();
             return nb::bytes(reinterpret_cast<const char*>(t.data()), t.size() * sizeof(int32_t));
           },
           "the page table's int32 values (native byte order), row-major [max_batch, max_pages_per_seq]");
}

}  // namespace flexattn::py
