"""Paged K/V cache bookkeeping, like torch.nn.attention.experimental's PagedAttention: pages of a pool
[num_pages, Hkv, page_size, D] handed to sequences (reserve / append / erase), a free list, and the int32
page table [max_batch, max_pages_per_seq] (-1 = unmapped) that the decode kernels read
(include/flexattn/decode.h, docs/kernels_decode.md). Host-side only; the native extension does the work.

    alloc = PageAllocator(num_pages=1024, page_size=16, max_batch=8, max_pages_per_seq=512)
    pos = alloc.append(seq, n_new)            # first logical position of the new tokens
    page = alloc.physical_page(seq, pos)      # where to write k/v row pos: pool[page, :, pos % 16]
    table = torch.tensor(alloc.page_table(), dtype=torch.int32).view(8, 512)
"""
from __future__ import annotations

from . import _native


def PageAllocator(num_pages: int, page_size: int, max_batch: int, max_pages_per_seq: int):
    """A native _C.PageAllocator (raises ImportError without the compiled extension, flexattn._C.Error on a
    bad size: page_size must be 1..256)."""
    return _native.require("PageAllocator").PageAllocator(num_pages, page_size, max_batch, max_pages_per_seq)


__all__ = ["PageAllocator"]
