"""flexattn.paged.PageAllocator: the native page bookkeeping seen from Python (no GPU, no torch)."""
import pytest

from flexattn import _native

pytestmark = pytest.mark.skipif(_native.load() is None, reason="needs the compiled extension flexattn._C")


def test_append_reserve_erase_and_the_page_table():
    from flexattn.paged import PageAllocator

    a = PageAllocator(num_pages=8, page_size=16, max_batch=2, max_pages_per_seq=4)
    assert a.append(0, 17) == 0
    assert a.append(1, 1) == 0
    assert a.length(0) == 17 and a.capacity(0) == 32 and a.free_pages == 5
    table = a.page_table()
    assert len(table) == 2 * 4
    assert table[:3] == [0, 1, -1] and table[4] == 2
    assert a.lengths() == [17, 1]
    assert a.physical_page(0, 20) == 1
    a.erase(0)
    assert a.free_pages == 7 and a.lengths() == [0, 1] and a.page_table()[0] == -1


def test_errors_are_value_errors():
    from flexattn.paged import PageAllocator

    with pytest.raises(ValueError, match="page_size: expected 1..256"):
        PageAllocator(4, 300, 1, 1)
    a = PageAllocator(2, 4, 1, 8)
    with pytest.raises(ValueError, match="only 2 are free"):
        a.reserve(0, 12)
