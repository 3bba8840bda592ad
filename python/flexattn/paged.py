"""Paged K/V caches from Python: the page bookkeeping (PageAllocator, like torch.nn.attention.experimental's
PagedAttention) and paged_attention, one decode step (1..64 query rows per sequence) against a contiguous
or paged cache with any score_mod / block mask (include/flexattn/decode.h, docs/kernels_decode.md).

    alloc = PageAllocator(num_pages=1024, page_size=16, max_batch=8, max_pages_per_seq=512)
    pos = alloc.append(seq, n_new)            # first logical position of the new tokens
    page = alloc.physical_page(seq, pos)      # where to write k/v row pos: pool[page, :, pos % 16]
    table = torch.tensor(alloc.page_table(), dtype=torch.int32).view(8, 512)
    out = paged_attention(q, k_pool, v_pool, table.cuda(), lens.cuda(), q_offsets=lens.cuda() - 1)

torch is imported only when paged_attention is called with torch tensors.
"""
from __future__ import annotations

from . import _native
from ._arrays import is_torch_tensor, torch_module
from ._tracer import mod_kind

_MAX_ROWS = 64  # query rows per sequence that the decode kernels take (kernels/decode, kDecodeMaxRows)
_MAX_PAGE_SIZE = 256  # the allocator's and the kernels' limit
_POSITION_LIMIT = 1 << 30  # logical query positions stay below this (the kernels' int32 index math)
_EMPTY_BLOCK = 1 << 30  # BLOCK_SIZE of the empty (dense) BlockMask


def PageAllocator(num_pages: int, page_size: int, max_batch: int, max_pages_per_seq: int):
    """A native _C.PageAllocator (raises ImportError without the compiled extension, flexattn._C.Error on a
    bad size: page_size must be 1..256)."""
    return _native.require("PageAllocator").PageAllocator(num_pages, page_size, max_batch, max_pages_per_seq)


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
    for name, x in (("query", query), ("key_cache", key_cache), ("value_cache", value_cache)):
        if not is_torch_tensor(x):
            raise TypeError(f"paged_attention: {name} must be a torch tensor, got {type(x).__name__}")
    call = _Call(torch, query, key_cache, value_cache, page_table, kv_lens, q_offsets, block_mask, enable_gqa)
    if score_mod is not None and mod_kind(score_mod) != "score_mod":  # the CPU path wraps it: say so here
        raise TypeError(f"paged_attention: score_mod must take (score, b, h, q_idx, kv_idx), got a "
                        f"{mod_kind(score_mod)} {getattr(score_mod, '__qualname__', score_mod)!r}")
    if scale is not None and not isinstance(scale, (int, float)):
        raise TypeError(f"paged_attention: scale must be a number or None, got {type(scale).__name__}")
    if torch.is_grad_enabled() and any(x.requires_grad for x in (query, key_cache, value_cache)):
        raise NotImplementedError("paged_attention: there is no backward (decoding is inference); run under "
                                  "torch.no_grad() or pass tensors that do not require grad")
    on_cuda = call.device.type == "cuda"
    if validate and not (on_cuda and torch.cuda.is_current_stream_capturing()):
        call.check_values()
    scale = 1.0 / float(call.D) ** 0.5 if scale is None else float(scale)
    if on_cuda and query.dtype in (torch.bfloat16, torch.float16):
        out, lse = _cuda_decode(torch, call, score_mod, block_mask, scale)
    else:
        out, lse = _decode_by_gather(torch, call, score_mod, block_mask, scale)
    return (out, lse) if return_lse else out


# ---- argument checks ----------------------------------------------------------------------------------------
def _shape(x):
    return tuple(int(s) for s in x.shape)



class _Call:
    """The checked arguments of one paged_attention call: shapes, layout, and the int32 arrays as
    contiguous int32 tensors on the query's device (None where absent)."""

    def __init__(self, torch, query, key_cache, value_cache, page_table, kv_lens, q_offsets, block_mask, enable_gqa):
        self.query, self.key, self.value = query, key_cache, value_cache
        for name, x, form in (("query", query, "[B, Hq, L, D]"),
                              ("key_cache", key_cache, "[Bkv, Hkv, S, D] or a pool [num_pages, Hkv, page_size, D]"),
                              ("value_cache", value_cache, "like key_cache, with its own last dim")):
            if x.dim() != 4:
                raise ValueError(f"paged_attention: {name}: expected a 4-D tensor {form}, got shape {_shape(x)}")
        # Each shape / device read once (a torch attribute read costs host time in a per-token call).
        dtype, self.device = query.dtype, query.device
        if dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            raise ValueError(f"paged_attention: query: expected float16, bfloat16, float32 or float64, got {dtype}")
        for name, x in (("key_cache", key_cache), ("value_cache", value_cache)):
            if x.dtype != dtype:
                raise ValueError(f"paged_attention: {name}: expected query's dtype {dtype}, got {x.dtype}")
            if x.device != self.device:
                raise ValueError(f"paged_attention: {name}: expected a tensor on query's device {self.device}, "
                                 f"got {x.device}")
        B, Hq, L, D = qs = _shape(query)
        ks, vs = _shape(key_cache), _shape(value_cache)
        if min(B, Hq, D) < 1:
            raise ValueError(f"paged_attention: query: every dimension must be at least 1, got shape {qs}")
        if not 1 <= L <= _MAX_ROWS:
            raise ValueError(f"paged_attention: query: takes 1..{_MAX_ROWS} query rows per sequence (dim 2), "
                             f"got L={L}")
        for name, shape in (("key_cache", ks), ("value_cache", vs)):
            if min(shape) < 1:
                raise ValueError(f"paged_attention: {name}: every dimension must be at least 1, got shape "
                                 f"{shape}")
        if ks[3] != D:
            raise ValueError(f"paged_attention: key_cache: head dim (dim 3) must equal query's D={D}, got "
                             f"{ks[3]}")
        if vs[:3] != ks[:3]:
            raise ValueError(f"paged_attention: value_cache: dims 0..2 must equal key_cache's "
                             f"{ks[:3]}, got {vs[:3]}")
        Hkv = ks[1]
        if not enable_gqa and Hq != Hkv:
            raise ValueError(f"paged_attention: key_cache: query and key/value must have the same number of heads "
                             f"without enable_gqa, got Hq={Hq} and Hkv={Hkv}")
        if Hq % Hkv:
            raise ValueError(f"paged_attention: key_cache: the query heads (Hq={Hq}) must be a multiple of the kv "
                             f"heads (Hkv={Hkv}, dim 1)")
        self.B, self.Hq, self.L, self.D, self.Hkv, self.Dv = B, Hq, L, D, Hkv, vs[3]
        self.paged = page_table is not None
        if self.paged:
            self.num_pages, self.page_size = ks[0], ks[2]
            if self.page_size > _MAX_PAGE_SIZE:
                raise ValueError(f"paged_attention: key_cache: page size (dim 2 of the pool) must be "
                                 f"1..{_MAX_PAGE_SIZE}, got {self.page_size}")
            self.page_table = self._ints(torch, "page_table", page_table, 2)
            if self.page_table.shape[0] != B or self.page_table.shape[1] < 1:
                raise ValueError(f"paged_attention: page_table: expected shape [B={B}, max_pages >= 1], got "
                                 f"{_shape(self.page_table)}")
            self.max_pages = int(self.page_table.shape[1])
            self.capacity = self.max_pages * self.page_size
        else:
            self.page_table, self.max_pages = None, 0
            if ks[0] not in (1, B):
                raise ValueError(f"paged_attention: key_cache: batch (dim 0) must be 1 or query's B={B}, got "
                                 f"{ks[0]} (pass page_table for a paged pool)")
            self.capacity = ks[2]
        if self.capacity >= 1 << 31:
            raise ValueError(f"paged_attention: key_cache: a capacity of {self.capacity} kv rows is over 2^31 - 1")
        self.kv_lens = None if kv_lens is None else self._ints(torch, "kv_lens", kv_lens, 1)
        self.q_offsets = None if q_offsets is None else self._ints(torch, "q_offsets", q_offsets, 1)
        for name, t in (("kv_lens", self.kv_lens), ("q_offsets", self.q_offsets)):
            if t is not None and t.shape[0] != B:
                raise ValueError(f"paged_attention: {name}: expected shape [B={B}], got {_shape(t)}")
        self.mask = block_mask
        if block_mask is not None and tuple(block_mask.BLOCK_SIZE) != (_EMPTY_BLOCK, _EMPTY_BLOCK):
            self._check_mask_shape()

    def _ints(self, torch, name, x, ndim):
        if not is_torch_tensor(x):
            raise TypeError(f"paged_attention: {name} must be an int32 torch tensor, got {type(x).__name__}")
        if x.dtype != torch.int32:
            raise ValueError(f"paged_attention: {name}: expected dtype torch.int32, got {x.dtype}")
        if x.device != self.device:
            raise ValueError(f"paged_attention: {name}: expected a tensor on query's device {self.device}, "
                             f"got {x.device}")
        if x.dim() != ndim:
            raise ValueError(f"paged_attention: {name}: expected a {ndim}-D tensor, got shape {_shape(x)}")
        return x.contiguous()

    def _check_mask_shape(self):
        m = self.mask
        num = m.kv_num_blocks
        if is_torch_tensor(num) and num.device != self.device:
            raise ValueError(f"paged_attention: block_mask: expected its tensors on query's device "
                             f"{self.device}, got {num.device}")
        lead = (1,) * (3 - len(num.shape)) + tuple(int(s) for s in num.shape)
        if lead[0] not in (1, self.B):
            raise ValueError(f"paged_attention: block_mask: batch must be 1 or B={self.B}, got {lead[0]}")
        if lead[1] not in (1, self.Hq):
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


# ---- the CUDA path: the native decode kernels ----------------------------------------------------------------
# Per-process memos of the CUDA path's host work that depends only on its key (a decode step runs this
# path every token, and its host time is on the timed path until the kernels are queued ahead):
_WS_BYTES = {}  # (id(variant), dtype, shapes, mask heads, device) -> split workspace bytes (shapes + device only)
_PADDED = {}  # (D, Dv) -> the kernels' head dims
_NOOP_BOUND = []  # [(spec, [], [])]: _bound_values(None, noop_mask), whose trace has nothing to bind
_TORCH_MODS = []  # [(_torch_api, _torch_ops)], imported on first use (they import torch); a function-level
# `from . import` costs ~3 us a call


def _torch_mods():
    if not _TORCH_MODS:
        from . import _torch_api, _torch_ops

        _TORCH_MODS.append((_torch_api, _torch_ops))
    return _TORCH_MODS[0]


def _ready(t, width):
    """_torch_ops._kernel_ready with a fast exit for the common case: the right width, contiguous (its
    strides are then multiples of width, itself a multiple of 16) and 16-byte aligned; otherwise its checks."""
    if t.shape[-1] == width and t.is_contiguous() and t.data_ptr() % 16 == 0:
        return t
    return _torch_mods()[1]._kernel_ready(t, width)


def _bound(score_mod, mask_mod):
    """_torch_api._bound_values, with the constant case (no score_mod, the noop mask: no block mask or an
    empty one) traced once per process instead of every call."""
    _torch_api = _torch_mods()[0]

    if score_mod is None and mask_mod is _torch_api.noop_mask:
        if not _NOOP_BOUND:
            _NOOP_BOUND.append(_torch_api._bound_values(None, mask_mod))
        return _NOOP_BOUND[0]
    return _torch_api._bound_values(score_mod, mask_mod)


def _cuda_decode(torch, c, score_mod, block_mask, scale):
    """flexattn._C.cuda_decode with the mods bound exactly as flex_attention binds them (_torch_api), every
    tensor allocated by torch, on torch's current stream."""
    _torch_api, _torch_ops = _torch_mods()
    C = _native.require("paged_attention on CUDA")
    q = c.query
    device = c.device
    # A decode mask is in logical positions over the whole cache, not (L, S) (its coverage is checked in
    # _Call.check_values), so the tensors are taken without _mask_parts' length check.
    mask_mod, mask, meta = _torch_api._mask_tensors(block_mask, device)
    spec, scalar_values, buffer_values = _bound(score_mod, mask_mod)
    buffers = [_torch_api._buffer_tensor(b, device) for b in buffer_values]
    # _torch_ops._bind without the scalar tensor when there are no scalars (its values are what _bind reads)
    variant, snames, bnames = _torch_ops._decode(spec, "")
    values = _torch_api._scalar_tensor(scalar_values).tolist() if scalar_values else []
    if len(values) != len(snames) or len(buffers) != len(bnames):
        raise ValueError(f"flexattn::attn: the spec names {len(snames)} scalars and {len(bnames)} buffers, got "
                         f"{len(values)} and {len(buffers)}")
    scalars, bufs = dict(zip(snames, values)), dict(zip(bnames, buffers))
    dims = _PADDED.get((c.D, c.Dv))
    if dims is None:
        dims = _PADDED.setdefault((c.D, c.Dv), tuple(_torch_ops._kernel_dims(C, c.D, c.Dv)))
    PD, PDv = dims
    # Head dims the kernels cannot take are zero-padded (for a pool: a copy of the pool, every call).
    qp, kp, vp = _ready(q, PD), _ready(c.key, PD), _ready(c.value, PDv)
    out = torch.empty((c.B, c.Hq, c.L, PDv), dtype=q.dtype, device=device)
    lse = torch.empty((c.B, c.Hq, c.L), dtype=torch.float32, device=device)
    ptr = (lambda t: 0 if t is None else t.data_ptr())
    current = torch.cuda.current_device()
    dev_index = device.index if device.index is not None else current
    dmask = _torch_ops._device_mask(mask, meta)
    args = dict(lse=lse.data_ptr(), scalars=scalars, buffers=_torch_ops._cuda_buffers(bufs), block_mask=dmask,
                page_table=ptr(c.page_table), max_pages=c.max_pages, kv_lens=ptr(c.kv_lens),
                q_offsets=ptr(c.q_offsets), scale=scale, device=dev_index,
                stream=torch.cuda.current_stream(device).cuda_stream)
    views = (variant, _torch_ops._view(qp), _torch_ops._view(kp), _torch_ops._view(vp), _torch_ops._view(out))
    # The workspace size depends on shapes and the device only (decode_workspace_bytes; the variant through
    # its kernels' occupancy, the mask through its head count): asked once per key, not every call. The
    # variant object stays referenced by the entry, so its id is never reused while the entry lives.
    key = (id(variant), q.dtype, c.B, c.Hq, c.L, PD, PDv, c.Hkv, int(c.key.shape[0]), c.capacity, c.paged,
           None if dmask is None else dmask[6], dev_index)
    # The native calls make the query's device current (cuCtxSetCurrent); torch's current device is
    # restored around them only when it is another one (the context manager costs host time every call).
    switch = torch.cuda.device(device) if dev_index != current else _NO_SWITCH
    with switch:
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
    return (out if PDv == c.Dv else out[..., :c.Dv].contiguous()), lse


class _NoSwitch:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_NO_SWITCH = _NoSwitch()


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
