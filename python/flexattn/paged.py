"""Paged K/V caches from Python: the page bookkeeping (PageAllocator, like torch.nn.attention.experimental's
PagedAttention) and paged_attention, one decode step (1..64 query rows per sequence) against a contiguous
or paged cache with any score_mod / block mask (include/flexattn/decode.h, docs/kernels_decode.md).

    alloc = PageAllocator(num_pages=1024, page_size=16, max_batch=8, max_pages_per_seq=512)
    pos = alloc.append(seq, n_new)            # first logical position of the new tokens
    page = alloc.physical_page(seq, pos)      # where to write k/v row pos: pool[page, :, pos % 16]
    table = torch.from_numpy(alloc.page_table_array())     # int32 [8, 512]
    out = paged_attention(q, k_pool, v_pool, table.cuda(), lens.cuda(), q_offsets=(lens.cuda() - 1).clamp(min=0))

torch is imported only when paged_attention is called with torch tensors.
"""
from __future__ import annotations

import functools
import operator
import weakref

from . import _bound_plan, _native
from ._arrays import is_torch_tensor, torch_module
from ._tracer import mod_callable, mod_kind
from ._env import env_flag

_MAX_ROWS = 64  # query rows per sequence that the decode kernels take (kernels/decode, kDecodeMaxRows)
_MAX_PAGE_SIZE = 256  # the allocator's and the kernels' limit
_POSITION_LIMIT = 1 << 30  # logical query positions stay below this (the kernels' int32 index math)
_EMPTY_BLOCK = 1 << 30  # BLOCK_SIZE of the empty (dense) BlockMask


def _int_arg(name, value):
    """value as a Python int (ints, numpy integers, 0-d integer tensors); TypeError naming the argument otherwise
    (nanobind's own message lists the signature, not the argument)."""
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected an int, got bool")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}") from None
    if not -(1 << 63) <= v < (1 << 63):  # (nanobind's TypeError for it lists the signature, not the argument)
        raise ValueError(f"{name}: expected an int in [-2^63, 2^63), got {v}")
    return v


class PageAllocator:
    """Page bookkeeping of a paged K/V cache (like torch's experimental PagedAttention): pages of a pool
    [num_pages, Hkv, page_size, D] handed to sequences 0..max_batch-1; page_table() is int32 row-major
    [max_batch, max_pages_per_seq], -1 where unmapped. Backed by the native flexattn::PageAllocator (loaded on
    first use: ImportError without the compiled extension). A bad size or request raises flexattn._C.Error (a
    ValueError) naming the argument and changes nothing; page_size must be 1..256."""

    __slots__ = ("_impl",)

    def __init__(self, num_pages: int, page_size: int, max_batch: int, max_pages_per_seq: int):
        args = [_int_arg(n, v) for n, v in (("num_pages", num_pages), ("page_size", page_size),
                                              ("max_batch", max_batch), ("max_pages_per_seq", max_pages_per_seq))]
        self._impl = _native.require("PageAllocator").PageAllocator(*args)

    def reserve(self, seq: int, length: int) -> None:
        """Grow seq's capacity to at least length tokens (whole pages from the free list; never shrinks)."""
        self._impl.reserve(_int_arg("seq", seq), _int_arg("length", length))

    def append(self, seq: int, tokens: int) -> int:
        """Reserve and extend seq by tokens; returns the logical position of the first new token."""
        return self._impl.append(_int_arg("seq", seq), _int_arg("tokens", tokens))

    def erase(self, seq: int) -> None:
        """Return every page of seq to the free list; its length and capacity become 0."""
        self._impl.erase(_int_arg("seq", seq))

    def length(self, seq: int) -> int:
        return self._impl.length(_int_arg("seq", seq))

    def capacity(self, seq: int) -> int:
        """Mapped pages x page_size."""
        return self._impl.capacity(_int_arg("seq", seq))

    def physical_page(self, seq: int, pos: int) -> int:
        """The pool page holding logical position pos (< capacity(seq)) of seq; its row is pos % page_size."""
        return self._impl.physical_page(_int_arg("seq", seq), _int_arg("pos", pos))

    def page_table(self) -> list:
        """int32 values, row-major [max_batch, max_pages_per_seq], -1 where unmapped."""
        return self._impl.page_table()

    def page_table_array(self):
        """The page table as a numpy int32 array [max_batch, max_pages_per_seq] (a copy; torch.from_numpy shares it):
        one memory copy, where page_table()'s list costs a Python int per entry (256 x 8192 entries: 13 ms, and
        torch.tensor of the list 126 ms)."""
        import numpy as np

        raw = np.frombuffer(self._impl.page_table_bytes(), dtype=np.int32)
        return raw.reshape(self._impl.max_batch, self._impl.max_pages_per_seq).copy()

    def lengths(self) -> list:
        """int32 values [max_batch]: the kv_lens of a decode call."""
        return self._impl.lengths()

    @property
    def free_pages(self) -> int:
        return self._impl.free_pages

    @property
    def num_pages(self) -> int:
        return self._impl.num_pages

    @property
    def page_size(self) -> int:
        return self._impl.page_size

    @property
    def max_batch(self) -> int:
        return self._impl.max_batch

    @property
    def max_pages_per_seq(self) -> int:
        return self._impl.max_pages_per_seq

    def __repr__(self):
        return (f"PageAllocator(num_pages={self.num_pages}, page_size={self.page_size}, max_batch={self.max_batch}, "
                f"max_pages_per_seq={self.max_pages_per_seq}; {self.free_pages} pages free)")


def paged_attention(query, key_cache, value_cache, page_table=None, kv_lens=None, *, q_offsets=None,
                    score_mod=None, block_mask=None, scale=None, return_lse=False, enable_gqa=True, validate=True):
    """One decode step: attention of short queries against a K/V cache, per sequence.

    query [B, Hq, L, D], 1 <= L <= 64. The cache is contiguous, key_cache [Bkv, Hkv, S, D] (Bkv = B or 1),
    or, with page_table (int32 [B, max_pages]: logical page -> physical page), pools
    [num_pages, Hkv, page_size, D]; value_cache likewise with its own last dim Dv.
    kv_lens: int32 [B], the valid kv length of each sequence (None = the capacity, S or
    max_pages * page_size). q_offsets: int32 [B] (None = 0): query row i of sequence b sits at logical
    position q_offsets[b] + i; kv row j at logical position j; kv positions >= kv_lens[b] are masked.
    score_mod, the block mask and its mask_mod see these logical positions, so a mask built once over the
    whole cache (e.g. create_block_mask(causal, 1, 1, MAX, MAX), a kv BLOCK_SIZE that is a multiple of
    64 for the CUDA kernels) serves every step. A row that attends to nothing gets out 0, lse -inf.

    CUDA bfloat16 / float16 tensors run the native decode kernels (split-KV, GQA heads packed) on
    torch's current stream; everything else gathers the pages into a contiguous cache and runs
    flex_attention with mods that see logical positions (the exact float64 reference on the CPU).
    validate=True reads page_table / kv_lens / q_offsets back to check them (one device sync on CUDA;
    skipped while a CUDA graph is captured). The kernels never read out of bounds without it: kv rows on a
    page id outside the pool are masked (as torch's PagedAttention masks unmapped pages) and kv_lens are
    clamped into [0, capacity].

    Returns out [B, Hq, L, Dv] (query's dtype), or (out, lse [B, Hq, L], natural log) with return_lse.
    Forward only. Every bad argument raises ValueError / TypeError naming it."""
    torch = torch_module()
    T = None if torch is None else torch.Tensor
    if T is None or not (isinstance(query, T) and isinstance(key_cache, T) and isinstance(value_cache, T)):
        for name, x in (("query", query), ("key_cache", key_cache), ("value_cache", value_cache)):
            if not is_torch_tensor(x):
                raise TypeError(f"paged_attention: {name} must be a torch tensor, got {type(x).__name__}")
    call = _Call(torch, query, key_cache, value_cache, page_table, kv_lens, q_offsets, block_mask, enable_gqa)
    if score_mod is not None and mod_kind(mod_callable(score_mod)) not in ("score_mod", None):  # the CPU path wraps it: say so here
        raise TypeError(f"paged_attention: score_mod must take (score, b, h, q_idx, kv_idx), got a "
                        f"{mod_kind(mod_callable(score_mod))} {getattr(score_mod, '__qualname__', score_mod)!r}")
    if scale is not None and not isinstance(scale, (int, float)):
        raise TypeError(f"paged_attention: scale must be a number or None, got {type(scale).__name__}")
    if torch.is_grad_enabled() and (query.requires_grad or key_cache.requires_grad or value_cache.requires_grad):
        raise NotImplementedError("paged_attention: there is no backward (decoding is inference); run under "
                                  "torch.no_grad() or pass tensors that do not require grad")
    on_cuda = query.is_cuda  # (device.type costs ~1.5 us a read)
    if validate and not (on_cuda and torch.cuda.is_current_stream_capturing()):
        call.check_values()
    scale = 1.0 / float(call.D) ** 0.5 if scale is None else float(scale)
    if on_cuda and (call.dtype is torch.bfloat16 or call.dtype is torch.float16):
        out, lse = _cuda_decode(torch, call, score_mod, block_mask, scale)
    else:
        out, lse = _decode_by_gather(torch, call, score_mod, block_mask, scale)
    return (out, lse) if return_lse else out


# ---- argument checks ----------------------------------------------------------------------------------------
# paged_attention runs once per generated token, so these checks are on every step's host time: each shape,
# dtype and device is read once (a torch attribute read costs 0.2-0.5 us), torch.Size is used as the tuple
# of ints it is, and the messages below are built only on the way to raising.
def _shape(x):
    return tuple(int(s) for s in x.shape)


_FLOAT_DTYPES = []  # [(float16, bfloat16, float32, float64)], filled on first use (torch is not imported here)


class _Call:
    """The checked arguments of one paged_attention call: shapes, layout, and the int32 arrays as
    contiguous int32 tensors on the query's device (None where absent)."""

    def __init__(self, torch, query, key_cache, value_cache, page_table, kv_lens, q_offsets, block_mask, enable_gqa):
        self.query, self.key, self.value = query, key_cache, value_cache
        qs, ks, vs = query.shape, key_cache.shape, value_cache.shape
        if len(qs) != 4 or len(ks) != 4 or len(vs) != 4:
            for name, x, form in (("query", query, "[B, Hq, L, D]"),
                                  ("key_cache", key_cache, "[Bkv, Hkv, S, D] or a pool [num_pages, Hkv, page_size, D]"),
                                  ("value_cache", value_cache, "like key_cache, with its own last dim")):
                if x.dim() != 4:
                    raise ValueError(f"paged_attention: {name}: expected a 4-D tensor {form}, got shape "
                                     f"{_shape(x)}")
        dtype, device = query.dtype, query.device
        self.dtype, self.device = dtype, device
        if not _FLOAT_DTYPES:
            _FLOAT_DTYPES.append((torch.float16, torch.bfloat16, torch.float32, torch.float64))
        if dtype not in _FLOAT_DTYPES[0]:
            raise ValueError(f"paged_attention: query: expected float16, bfloat16, float32 or float64, got {dtype}")
        if (key_cache.dtype != dtype or key_cache.device != device or value_cache.dtype != dtype
                or value_cache.device != device):
            for name, x in (("key_cache", key_cache), ("value_cache", value_cache)):
                if x.dtype != dtype:
                    raise ValueError(f"paged_attention: {name}: expected query's dtype {dtype}, got {x.dtype}")
                if x.device != device:
                    raise ValueError(f"paged_attention: {name}: expected a tensor on query's device {device}, "
                                     f"got {x.device}")
        B, Hq, L, D = qs
        if B < 1 or Hq < 1 or D < 1:
            raise ValueError(f"paged_attention: query: every dimension must be at least 1, got shape {tuple(qs)}")
        if not 1 <= L <= _MAX_ROWS:
            raise ValueError(f"paged_attention: query: takes 1..{_MAX_ROWS} query rows per sequence (dim 2), "
                             f"got L={L}")
        if min(ks) < 1 or min(vs) < 1:
            for name, shape in (("key_cache", ks), ("value_cache", vs)):
                if min(shape) < 1:
                    raise ValueError(f"paged_attention: {name}: every dimension must be at least 1, got shape "
                                     f"{tuple(shape)}")
        if ks[3] != D:
            raise ValueError(f"paged_attention: key_cache: head dim (dim 3) must equal query's D={D}, got "
                             f"{ks[3]}")
        if vs[0] != ks[0] or vs[1] != ks[1] or vs[2] != ks[2]:
            raise ValueError(f"paged_attention: value_cache: dims 0..2 must equal key_cache's "
                             f"{tuple(ks[:3])}, got {tuple(vs[:3])}")
        Hkv = ks[1]
        if not enable_gqa and Hq != Hkv:
            raise ValueError(f"paged_attention: key_cache: query and key/value must have the same number of heads "
                             f"without enable_gqa, got Hq={Hq} and Hkv={Hkv}")
        if Hq % Hkv:
            raise ValueError(f"paged_attention: key_cache: the query heads (Hq={Hq}) must be a multiple of the kv "
                             f"heads (Hkv={Hkv}, dim 1)")
        self.qs, self.ks, self.vs = qs, ks, vs
        self.B, self.Hq, self.L, self.D, self.Hkv, self.Dv = B, Hq, L, D, Hkv, vs[3]
        self.paged = page_table is not None
        if self.paged:
            self.num_pages, self.page_size = ks[0], ks[2]
            if self.page_size > _MAX_PAGE_SIZE:
                raise ValueError(f"paged_attention: key_cache: page size (dim 2 of the pool) must be "
                                 f"1..{_MAX_PAGE_SIZE}, got {self.page_size}")
            self.page_table, shape = self._ints(torch, "page_table", page_table, 2)
            if shape[0] != B or shape[1] < 1:
                raise ValueError(f"paged_attention: page_table: expected shape [B={B}, max_pages >= 1], got "
                                 f"{tuple(shape)}")
            self.max_pages = shape[1]
            self.capacity = self.max_pages * self.page_size
        else:
            self.page_table, self.max_pages = None, 0
            if ks[0] != 1 and ks[0] != B:
                raise ValueError(f"paged_attention: key_cache: batch (dim 0) must be 1 or query's B={B}, got "
                                 f"{ks[0]} (pass page_table for a paged pool)")
            self.capacity = ks[2]
        if self.capacity >= 1 << 31:
            raise ValueError(f"paged_attention: key_cache: a capacity of {self.capacity} kv rows is over 2^31 - 1")
        self.kv_lens = self.q_offsets = None
        if kv_lens is not None:
            self.kv_lens, lens_shape = self._ints(torch, "kv_lens", kv_lens, 1)
        if q_offsets is not None:
            self.q_offsets, offs_shape = self._ints(torch, "q_offsets", q_offsets, 1)
        if kv_lens is not None and lens_shape[0] != B:
            raise ValueError(f"paged_attention: kv_lens: expected shape [B={B}], got {tuple(lens_shape)}")
        if q_offsets is not None and offs_shape[0] != B:
            raise ValueError(f"paged_attention: q_offsets: expected shape [B={B}], got {tuple(offs_shape)}")
        self.mask, self.mask_args = block_mask, None
        if block_mask is not None and tuple(block_mask.BLOCK_SIZE) != (_EMPTY_BLOCK, _EMPTY_BLOCK):
            self.mask_args = _mask_args(block_mask)
            self._check_mask_shape()

    def _ints(self, torch, name, x, ndim):
        """(x as a contiguous int32 tensor on the query's device, its shape)."""
        if (isinstance(x, torch.Tensor) and x.dtype is torch.int32 and x.device == self.device
                and x.is_contiguous()):
            shape = x.shape
            if len(shape) == ndim:
                return x, shape
        if not is_torch_tensor(x):
            raise TypeError(f"paged_attention: {name} must be an int32 torch tensor, got {type(x).__name__}")
        if x.dtype != torch.int32:
            raise ValueError(f"paged_attention: {name}: expected dtype torch.int32, got {x.dtype}")
        if x.device != self.device:
            raise ValueError(f"paged_attention: {name}: expected a tensor on query's device {self.device}, "
                             f"got {x.device}")
        if x.dim() != ndim:
            raise ValueError(f"paged_attention: {name}: expected a {ndim}-D tensor, got shape {_shape(x)}")
        x = x.contiguous()
        return x, x.shape

    def _check_mask_shape(self):
        a = self.mask_args
        if a.num_device is not None and a.num_device != self.device:
            raise ValueError(f"paged_attention: block_mask: expected its tensors on query's device "
                             f"{self.device}, got {a.num_device}")
        lead = a.lead
        if lead[0] != 1 and lead[0] != self.B:
            raise ValueError(f"paged_attention: block_mask: batch must be 1 or B={self.B}, got {lead[0]}")
        if lead[1] != 1 and lead[1] != self.Hq:
            raise ValueError(f"paged_attention: block_mask: heads must be 1 or Hq={self.Hq}, got {lead[1]}")

    def check_values(self):
        """The data-dependent checks (host copies of the int32 arrays)."""
        L, cap = self.L, self.capacity
        lens = [cap] * self.B if self.kv_lens is None else self.kv_lens.tolist()
        offs = [0] * self.B if self.q_offsets is None else self.q_offsets.tolist()
        for b, n in enumerate(lens):
            if not 0 <= n <= cap:
                raise ValueError(f"paged_attention: kv_lens: kv_lens[{b}] = {n} is outside [0, {cap}] (the cache "
                                 f"capacity, {'max_pages * page_size' if self.paged else 'S'})")
        for b, o in enumerate(offs):
            if not 0 <= o < _POSITION_LIMIT - L:
                raise ValueError(f"paged_attention: q_offsets: q_offsets[{b}] = {o} is outside [0, 2^30 - L)")
        if self.paged:
            table = self.page_table.tolist()
            for b, n in enumerate(lens):
                for j, page in enumerate(table[b][:(n + self.page_size - 1) // self.page_size]):
                    if not 0 <= page < self.num_pages:
                        raise ValueError(f"paged_attention: page_table: page_table[{b}, {j}] = {page} is not a "
                                         f"page of the pool (num_pages={self.num_pages}) but holds kv positions "
                                         f"below kv_lens[{b}] = {n}")
        if self.mask is not None and tuple(self.mask.BLOCK_SIZE) != (_EMPTY_BLOCK, _EMPTY_BLOCK):
            q_len, kv_len = (int(s) for s in self.mask.seq_lengths)
            b = max(range(self.B), key=lambda i: offs[i])
            if offs[b] + L > q_len:
                raise ValueError(f"paged_attention: block_mask: built for Q_LEN={q_len}, but query row {L - 1} of "
                                 f"sequence {b} sits at logical position {offs[b] + L - 1}; build the mask over "
                                 "logical positions (e.g. the whole cache)")
            b = max(range(self.B), key=lambda i: lens[i])
            if lens[b] > kv_len:
                raise ValueError(f"paged_attention: block_mask: built for KV_LEN={kv_len}, but kv_lens[{b}] = "
                                 f"{lens[b]}; build the mask over logical positions (e.g. the whole cache)")


# ---- the block mask's arguments, per BlockMask object --------------------------------------------------------
# A decode loop passes the same BlockMask every step; what the call derives from it (the kv-side arrays as
# contiguous int32 tensors on the device, their pointers and block counts, the batch / head dims checked by
# _Call) is kept per BlockMask object and reused while the object still holds the same arrays, unchanged:
# the same objects in its fields, each tensor with the same data pointer and version counter (every in-place
# op bumps it, metadata ops such as resize_ / unsqueeze_ / set_ included), the same BLOCK_SIZE and
# seq_lengths tuples. The kernels read the arrays' memory at run time, so an in-place edit of a device
# mask is seen either way; a mask converted for the call (another device or dtype) is converted again
# after one. Masks with numpy fields are not kept (numpy has no version counter).
# FLEXATTN_PAGED_CACHE=0 (docs/env_vars.md): neither these nor the binding plans are kept; every call traces
# the mods and prepares the mask as before session 6 (an A/B switch, and the way back).
_CACHE = env_flag("FLEXATTN_PAGED_CACHE", True)
_KV_FIELDS = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices")
_MASKS = {}  # id(block mask) -> _MaskArgs
_MAX_MASKS = 64


def _stamp(x):
    """(data pointer, version) of a torch tensor; None for None; raises for anything else."""
    if x is None:
        return None
    return x.data_ptr(), x._version


class _MaskArgs:
    """What a decode call takes from a (non-empty) BlockMask: num_device / lead for _Call's checks, and
    per device the block_mask argument of _C.cuda_decode (device_arg)."""

    def __init__(self, bm):
        self.block_size, self.seq_lengths = bm.BLOCK_SIZE, bm.seq_lengths
        self.fields = tuple(getattr(bm, f) for f in _KV_FIELDS)
        num = self.fields[0]
        self.num_device = num.device if is_torch_tensor(num) else None
        self.lead = (1,) * (3 - len(num.shape)) + tuple(int(s) for s in num.shape)
        self.by_device = {}
        try:
            self.stamps = tuple(_stamp(x) for x in self.fields)
            self.cacheable = all(x is None or is_torch_tensor(x) for x in self.fields)
        except Exception:  # noqa: BLE001 - no data pointer / version (e.g. numpy): computed per call
            self.stamps, self.cacheable = None, False
        self.ref = None

    def holds(self, bm):
        """Whether bm still has the fields this was computed from (see the comment above _KV_FIELDS)."""
        if bm.BLOCK_SIZE is not self.block_size or bm.seq_lengths is not self.seq_lengths:
            return False
        # Unrolled over the four kv-side fields: this runs every decode step.
        f, st = self.fields, self.stamps
        num, idx, fnum, fidx = bm.kv_num_blocks, bm.kv_indices, bm.full_kv_num_blocks, bm.full_kv_indices
        if num is not f[0] or idx is not f[1] or fnum is not f[2] or fidx is not f[3]:
            return False
        if num.data_ptr() != st[0][0] or num._version != st[0][1] or idx.data_ptr() != st[1][0] \
                or idx._version != st[1][1]:
            return False
        return fnum is None or (fnum.data_ptr() == st[2][0] and fnum._version == st[2][1]
                                and fidx.data_ptr() == st[3][0] and fidx._version == st[3][1])

    def device_arg(self, torch, device):
        """(q_len, kv_len, q_block, kv_block, 8 pointers, B, H, nq, nkv): _torch_ops._device_mask of the
        kv-side arrays prepared as _torch_api._mask_tensors prepares them. The q-side pointers are 0:
        the decode kernels never read them (src/runtime/decode_cuda.cc, set_mask)."""
        hit = self.by_device.get(device)
        if hit is not None:
            return hit[1]
        num, idx, fnum, fidx = self.fields
        num, idx = _prep(torch, num, 3, device), _prep(torch, idx, 4, device)
        if fnum is not None:  # the full pair is taken when full_kv_num_blocks is given (_mask_tensors)
            fnum, fidx = _prep(torch, fnum, 3, device), _prep(torch, fidx, 4, device)
        else:
            fidx = None
        q_len, kv_len = self.seq_lengths
        qb, kvb = self.block_size
        ptrs = [num.data_ptr(), idx.data_ptr(), 0 if fnum is None else fnum.data_ptr(),
                0 if fnum is None else fidx.data_ptr(), 0, 0, 0, 0]
        B, H, nq, nkv = idx.shape
        arg = (int(q_len), int(kv_len), int(qb), int(kvb), ptrs, B, H, nq, nkv)
        if self.cacheable:  # the prepared tensors stay referenced: their pointers stay valid
            self.by_device[device] = ((num, idx, fnum, fidx), arg)
        else:
            self.keep = (num, idx, fnum, fidx)  # alive until this call's native call returned
        return arg


def _prep(torch, x, nd, device):
    """_torch_api._mask_tensors' prep: x as a contiguous int32 tensor of nd dims on device."""
    if (isinstance(x, torch.Tensor) and x.dtype == torch.int32 and x.dim() == nd and x.device == device
            and x.is_contiguous()):
        return x
    t = torch.as_tensor(x).to(device=device, dtype=torch.int32)
    while t.dim() < nd:
        t = t.unsqueeze(0)
    return t.contiguous()


def _mask_args(bm):
    key = id(bm)
    held = _MASKS.get(key) if _CACHE else None
    if held is not None and held.ref() is bm and held.holds(bm):
        return held
    args = _MaskArgs(bm)
    if args.cacheable and _CACHE:
        try:
            # The entry leaves with its BlockMask (and with it the tensors it keeps on the device).
            args.ref = weakref.ref(bm, functools.partial(_drop_mask, key))
        except TypeError:
            return args
        if len(_MASKS) >= _MAX_MASKS and key not in _MASKS:
            _MASKS.clear()
        _MASKS[key] = args
    return args


def _drop_mask(key, ref):
    held = _MASKS.get(key)
    if held is not None and held.ref is ref:
        del _MASKS[key]


# ---- the CUDA path: the native decode kernels ----------------------------------------------------------------
# Per-process memos of the CUDA path's host work that depends only on its key (a decode step runs this
# path every token, and its host time is on the timed path until the kernels are queued ahead):
_WS_BYTES = {}  # (id(variant), dtype, shapes, mask heads, device) -> split workspace bytes (shapes + device only)
_PADDED = {}  # (D, Dv) -> the kernels' head dims
_NOOP_BOUND = []  # [bound of (None, noop_mask)]: its trace has nothing to bind, so it is bound once
_TORCH_MODS = []  # [(_torch_api, _torch_ops)], imported on first use (they import torch); a function-level
# `from . import` costs ~3 us a call


def _torch_mods():
    if not _TORCH_MODS:
        from . import _torch_api, _torch_ops

        _TORCH_MODS.append((_torch_api, _torch_ops))
    return _TORCH_MODS[0]


def _cuda_now(torch, index):
    """(torch's current device, the raw handle of torch's current stream on device `index`): what
    torch.cuda.current_device() and torch.cuda.current_stream(index).cuda_stream answer, without building
    a Stream object (~5 us a call). CUDA is initialised: the query is a CUDA tensor."""
    return torch._C._cuda_getDevice(), torch._C._cuda_getCurrentRawStream(index)


def _kernel_view(t, shape, width, dtype_name):
    """(t or its kernel-ready copy, its _C view (data_ptr, dtype, shape, strides)). The common case exits
    early: the right width, contiguous (its strides are then multiples of width, itself a multiple of 16;
    the empty strides tell the native side so, which derives them from the shape) and 16-byte aligned.
    Otherwise _torch_ops._kernel_ready's checks and copies."""
    if shape[-1] == width and t.is_contiguous():
        ptr = t.data_ptr()
        if ptr % 16 == 0:
            return t, (ptr, dtype_name, shape, ())
    t = _torch_mods()[1]._kernel_ready(t, width)
    return t, (t.data_ptr(), dtype_name, t.shape, t.stride())


def _bound(score_mod, mask_mod):
    """(variant, scalar names, buffer names, scalar values, captured buffers) of the mods, bound exactly
    as flex_attention binds them (_torch_api._bound_values, _torch_ops._bind) but through a binding plan
    (_bound_plan): the captures are re-read every call without re-walking them. The constant case (no
    score_mod, the noop mask: no block mask or an empty one) is bound once per process."""
    _torch_api = _torch_mods()[0]
    if score_mod is None and mask_mod is _torch_api.noop_mask:
        if not _NOOP_BOUND:
            _NOOP_BOUND.append(_bound_plan.bound(None, mask_mod))
        return _NOOP_BOUND[0]
    if not _CACHE:
        return _bound_plan._full(score_mod, mask_mod)[0]
    return _bound_plan.bound(score_mod, mask_mod)


def _cuda_decode(torch, c, score_mod, block_mask, scale):
    """flexattn._C.cuda_decode with the mods bound exactly as flex_attention binds them (_torch_api), every
    tensor allocated by torch, on torch's current stream."""
    _torch_api, _torch_ops = _torch_mods()
    C = _native.require("paged_attention on CUDA")
    q = c.query
    device = c.device
    # A decode mask is in logical positions over the whole cache, not (L, S) (its coverage is checked in
    # _Call.check_values), so the arrays are taken without _mask_parts' length check.
    if block_mask is None:
        mask_mod, dmask = _torch_api.noop_mask, None
    elif tuple(block_mask.BLOCK_SIZE) == (_EMPTY_BLOCK, _EMPTY_BLOCK):
        mask_mod, dmask = block_mask.mask_mod, None
    else:
        # margs stays referenced until this returns: it keeps the prepared arrays' memory alive
        margs = c.mask_args if block_mask is c.mask else _mask_args(block_mask)
        mask_mod, dmask = block_mask.mask_mod, margs.device_arg(torch, device)
    variant, snames, bnames, values, buffer_values = _bound(score_mod, mask_mod)
    scalars = dict(zip(snames, values))
    buffers = [_torch_api._buffer_tensor(b, device) for b in buffer_values]  # alive until the call returned
    dims = _PADDED.get((c.D, c.Dv))
    if dims is None:
        dims = _PADDED.setdefault((c.D, c.Dv), tuple(_torch_ops._kernel_dims(C, c.D, c.Dv)))
    PD, PDv = dims
    name = _torch_ops._DTYPE_NAMES[c.dtype]
    # Head dims the kernels cannot take are zero-padded (for a pool: a copy of the pool, every call).
    qp, qv = _kernel_view(q, c.qs, PD, name)
    kp, kv = _kernel_view(c.key, c.ks, PD, name)
    vp, vv = _kernel_view(c.value, c.vs, PDv, name)
    out_shape = (c.B, c.Hq, c.L, PDv)
    out = torch.empty(out_shape, dtype=c.dtype, device=device)
    lse = torch.empty(out_shape[:3], dtype=torch.float32, device=device)
    dev_index = device.index
    current, stream = _cuda_now(torch, dev_index if dev_index is not None else -1)
    if dev_index is None:
        dev_index = current
    pt, lens, offs = c.page_table, c.kv_lens, c.q_offsets
    args = dict(lse=lse.data_ptr(), scalars=scalars,
                buffers={n: (b.data_ptr(), _torch_ops._DTYPE_NAMES[b.dtype], b.shape) for n, b in zip(bnames, buffers)},
                block_mask=dmask, page_table=0 if pt is None else pt.data_ptr(), max_pages=c.max_pages,
                kv_lens=0 if lens is None else lens.data_ptr(), q_offsets=0 if offs is None else offs.data_ptr(),
                scale=scale, device=dev_index, stream=stream)
    views = (variant, qv, kv, vv, (out.data_ptr(), name, out_shape, ()))
    # The workspace size depends on shapes and the device only (decode_workspace_bytes; the variant through
    # its kernels' occupancy, the mask through its head count): asked once per key, not every call. The
    # variant object stays referenced by the entry, so its id is never reused while the entry lives.
    key = (id(variant), c.dtype, c.B, c.Hq, c.L, PD, PDv, c.Hkv, c.ks[0], c.capacity, c.paged,
           None if dmask is None else dmask[6], dev_index)
    # The native calls make the query's device current (cuCtxSetCurrent); torch's current device is
    # restored around them only when it is another one (the context manager costs host time every call).
    if dev_index == current:
        _enqueue(torch, C, variant, key, views, args, device)
    else:
        with torch.cuda.device(device):
            _enqueue(torch, C, variant, key, views, args, device)
    return (out if PDv == c.Dv else out[..., :c.Dv].contiguous()), lse


def _enqueue(torch, C, variant, key, views, args, device):
    """The workspace and the native call of _cuda_decode."""
    hit = _WS_BYTES.get(key)
    if hit is not None and hit[1] is variant:
        nbytes = hit[0]
    else:
        nbytes = C.cuda_decode_workspace_bytes(*views, **args)
        _WS_BYTES[key] = (nbytes, variant)
    # torch's allocator hands out 512-byte aligned blocks (the call needs 16); freed when this returns,
    # which is safe: a later user of the block is ordered after the kernels on the same stream.
    ws = torch.empty(nbytes, dtype=torch.uint8, device=device) if nbytes else None
    C.cuda_decode(*views, workspace=ws.data_ptr() if nbytes else 0, workspace_bytes=nbytes, **args)


# ---- everything else: gather the pages, then flex_attention on logical positions -----------------------------
def _contiguous_cache(torch, c, cache):
    """[B, Hkv, capacity, Dx]: the pages of each sequence in logical order (a page id outside the pool
    gives zero rows, which _logical_mods masks), or the contiguous cache broadcast to B sequences."""
    if not c.paged:
        return cache.expand(c.B, *cache.shape[1:])
    ids = c.page_table.long()
    valid = (ids >= 0) & (ids < c.num_pages)
    rows = cache[ids.clamp(0, c.num_pages - 1)]  # [B, max_pages, Hkv, page_size, Dx]
    rows = torch.where(valid[:, :, None, None, None], rows, torch.zeros((), dtype=cache.dtype, device=cache.device))
    return rows.permute(0, 2, 1, 3, 4).reshape(c.B, c.Hkv, c.capacity, cache.shape[-1])


def _tile_classes(torch, c, block_mask):
    """(classes int32 [Bm, Hm, nq, nkv]: 0 skipped, 1 partial, 2 full; (Q_BLOCK, KV_BLOCK))."""
    from .block_mask import _FIELDS, BlockMask

    bm = block_mask
    if not isinstance(bm, BlockMask):  # e.g. torch's own BlockMask: the same fields
        bm = BlockMask(bm.seq_lengths, *(getattr(bm, f, None) for f in _FIELDS), bm.BLOCK_SIZE, bm.mask_mod)
    cls = bm.tile_classes()
    cls = cls.reshape((1,) * (4 - cls.ndim) + cls.shape)
    return torch.from_numpy(cls.astype("int32")).to(c.query.device), tuple(int(s) for s in bm.BLOCK_SIZE)


def _logical_mods(torch, c, score_mod, block_mask):
    """(score_mod, mask_mod) over the contiguous cache that give the user's mods logical positions and
    mask kv >= kv_lens[b] and kv rows on a page id outside the pool. Built from captured int32 tensors
    indexed by b, so flexattn's tracer reads them as buffers: one trace serves every step."""
    dev = c.query.device
    q_off = c.q_offsets if c.q_offsets is not None else torch.zeros(c.B, dtype=torch.int32, device=dev)
    # the kernels' clamp (validate=False lets any offset through): a negative one indexed the mask's last row
    q_off = q_off.clamp(0, _POSITION_LIMIT - c.L)
    lens = c.kv_lens if c.kv_lens is not None else torch.full((c.B,), c.capacity, dtype=torch.int32, device=dev)
    mapped = None
    if c.paged:
        ids = c.page_table
        mapped = ((ids >= 0) & (ids < c.num_pages)).to(torch.int32)  # [B, max_pages]
        page_size = c.capacity // ids.shape[1]
    user_score = score_mod
    user_mask = None if block_mask is None else block_mask.mask_mod
    if block_mask is not None and tuple(block_mask.BLOCK_SIZE) != (_EMPTY_BLOCK, _EMPTY_BLOCK):
        classes, (q_block, kv_block) = _tile_classes(torch, c, block_mask)
        # A batch / head dim of 1 broadcasts: the index is multiplied by 0.
        b_sel, h_sel = int(classes.shape[0] > 1), int(classes.shape[1] > 1)
        q_cover, kv_cover = classes.shape[2] * q_block, classes.shape[3] * kv_block
        if user_mask is None:
            from .masks import noop_mask

            user_mask = noop_mask
    else:
        classes = None

    def logical_score(score, b, h, q_idx, kv_idx):
        return user_score(score, b, h, q_off[b] + q_idx, kv_idx)

    def logical_mask(b, h, q_idx, kv_idx):
        q = q_off[b] + q_idx
        keep = kv_idx < lens[b]
        if mapped is not None:
            keep = keep & (mapped[b, kv_idx // page_size] == 1)
        if classes is not None:
            # The block structure of torch's semantics: full tiles attend, partial tiles ask mask_mod,
            # skipped tiles and positions past the mask's blocks attend nothing.
            tile = classes[b * b_sel, h * h_sel, q // q_block, kv_idx // kv_block]
            inside = (q < q_cover) & (kv_idx < kv_cover)
            return keep & inside & ((tile == 2) | ((tile == 1) & user_mask(b, h, q, kv_idx)))
        if user_mask is not None:
            return keep & user_mask(b, h, q, kv_idx)
        return keep

    return (None if user_score is None else logical_score), logical_mask


def _decode_by_gather(torch, c, score_mod, block_mask, scale):
    from .attention import AuxRequest, flex_attention
    from .block_mask import empty_block_mask

    k = _contiguous_cache(torch, c, c.key)
    v = _contiguous_cache(torch, c, c.value)
    score, mask = _logical_mods(torch, c, score_mod, block_mask)
    dense = empty_block_mask(c.query)  # one tile over everything: mask_mod decides every position
    dense.mask_mod = mask
    out, aux = flex_attention(c.query, k, v, score_mod=score, block_mask=dense, scale=scale, enable_gqa=True,
                              return_aux=AuxRequest(lse=True))
    return out, aux.lse


__all__ = ["PageAllocator", "paged_attention"]
