"""BlockMask with torch's fields and layout (int32, row-major; numpy arrays or torch tensors), and
create_block_mask."""
from __future__ import annotations

import functools
import itertools
import operator
import sys
import warnings

import numpy as np

from . import _block_layout as layout
from . import _native
from ._arrays import device_of, from_numpy, is_torch_tensor, resolve_device, to_numpy, torch_module
from ._tracer import mod_callable, mod_kind, trace
from .masks import _check_sizes, noop_mask

_DEFAULT_SPARSE_BLOCK_SIZE = 128
_LARGE_SPARSE_BLOCK_SIZE = 1 << 30
_FIELDS = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks", "q_indices",
           "full_q_num_blocks", "full_q_indices")


_DQ_FIELDS = ("dq_write_order", "dq_write_order_full", "dq_kv_order", "dq_kv_order_spt")
_TORCH_FORMULA = {}  # "blocks" / "dq": the probes' answers, once torch is there to ask


def _torch_has_dq_fields() -> bool:
    """Whether the torch in this process (imported already: never imported here) has BlockMask's dq_* fields."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    if "dq" not in _TORCH_FORMULA:
        try:
            import inspect

            from torch.nn.attention.flex_attention import BlockMask as TorchBlockMask
            _TORCH_FORMULA["dq"] = "dq_write_order" in inspect.signature(TorchBlockMask.__init__).parameters
        except Exception:  # noqa: BLE001 - an older or partial torch: its 13-entry layout
            _TORCH_FORMULA["dq"] = False
    return _TORCH_FORMULA["dq"]


def _torch_counts_blocks() -> bool:
    """Whether the torch in this process computes BlockMask.sparsity() by blocks (the formula changed in
    pytorch/pytorch#188868, mid 2026: area over numel went negative for partial edge blocks). Asked of torch's
    own BlockMask on a 1 x 1 mask with one 128 x 128 block (area: hugely negative, blocks: 0); False when torch
    is not imported (it is never imported here) or cannot answer."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    if "blocks" in _TORCH_FORMULA:
        return _TORCH_FORMULA["blocks"]
    _TORCH_FORMULA["blocks"] = _probe_torch_formula(torch)
    return _TORCH_FORMULA["blocks"]


def _probe_torch_formula(torch) -> bool:
    try:
        from torch.nn.attention.flex_attention import BlockMask as TorchBlockMask
        one = torch.ones(1, 1, 1, dtype=torch.int32)
        probe = TorchBlockMask.from_kv_blocks(one, torch.zeros(1, 1, 1, 1, dtype=torch.int32), BLOCK_SIZE=128,
                                              seq_lengths=(1, 1))
        return probe.sparsity() >= 0
    except Exception:  # noqa: BLE001 - an older or partial torch: keep the area formula
        return False


def _sliced_mask_mod_error(b, h, q_idx, kv_idx):
    raise RuntimeError("Cannot use mask_mod from a sliced BlockMask: assign a mask_mod to the sliced mask "
                       "(typically the original one with a query offset) before using it")


def _block_size(BLOCK_SIZE):
    bs = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, (int, np.integer)) else tuple(BLOCK_SIZE)
    if len(bs) != 2 or any(not isinstance(x, (int, np.integer)) or x < 1 for x in bs):
        raise ValueError(f"BLOCK_SIZE must be a positive int or a pair (Q_BLOCK_SIZE, KV_BLOCK_SIZE), got "
                         f"{BLOCK_SIZE!r}")
    return int(bs[0]), int(bs[1])


def _int32(x, what="block mask index"):
    """x as a contiguous int32 numpy array; TypeError for a non-integer array (torch raises an IndexError there;
    a silent truncation of 1.7 to 1 would change which tiles run)."""
    if x is None:
        return None
    a = to_numpy(x)
    if a.dtype.kind not in "iub":
        raise TypeError(f"{what}: expected an integer tensor or array, got dtype {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.int32)


class BlockMask:
    """A block-sparse attention mask (torch.nn.attention.flex_attention.BlockMask).

    kv_num_blocks [B, H, nQ] / kv_indices [B, H, nQ, nKV]: the partial tiles of each query-block row
    (mask_mod evaluated there); full_kv_*: the full tiles (mask_mod skipped); q_* / full_q_*: the
    transposes. BLOCK_SIZE = (Q_BLOCK_SIZE, KV_BLOCK_SIZE); seq_lengths = (Q_LEN, KV_LEN).
    """

    def __new__(cls, *args, **kwargs):
        # A mask of torch tensors is also an instance of torch's BlockMask, so code that dispatches on
        # isinstance(mask, torch's BlockMask) (transformers' flex_attention_forward) takes flexattn's masks too.
        if cls is BlockMask:
            num = args[1] if len(args) > 1 else kwargs.get("kv_num_blocks")
            if is_torch_tensor(num):
                cls = _torch_compatible_class()
        return object.__new__(cls)

    def __reduce__(self):
        # through the constructor, whose __new__ picks the class again (the torch-compatible one is made at run time,
        # so pickle cannot find it by name)
        dq = {f: getattr(self, f) for f in _DQ_FIELDS if getattr(self, f, None) is not None}
        # (only the dq_* fields that are set: a mask pickled without them loads in flexattn before they existed)
        return (functools.partial(BlockMask, **dq) if dq else BlockMask,
                (self.seq_lengths, *(getattr(self, f) for f in _FIELDS), self.BLOCK_SIZE, self.mask_mod))

    def __init__(self, seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, q_num_blocks,
                 q_indices, full_q_num_blocks, full_q_indices, BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE,
                 mask_mod=None, *, dq_write_order=None, dq_write_order_full=None, dq_kv_order=None,
                 dq_kv_order_spt=None):
        if len(kv_indices.shape) < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise ValueError("full_kv_num_blocks and full_kv_indices must be both provided or omitted")
        if (full_q_num_blocks is None) != (full_q_indices is None):
            raise ValueError("full_q_num_blocks and full_q_indices must be both provided or omitted")
        self.seq_lengths = tuple(layout.as_size(s) for s in seq_lengths)
        self.kv_num_blocks, self.kv_indices = kv_num_blocks, kv_indices
        self.full_kv_num_blocks, self.full_kv_indices = full_kv_num_blocks, full_kv_indices
        self.q_num_blocks, self.q_indices = q_num_blocks, q_indices
        self.full_q_num_blocks, self.full_q_indices = full_q_num_blocks, full_q_indices
        self.BLOCK_SIZE = _block_size(BLOCK_SIZE)
        self.mask_mod = noop_mask if mask_mod is None else mask_mod
        # torch's (>= 2.12) metadata for its deterministic backward: kept for torch's own kernels (a flexattn mask in
        # torch's compiled flex_attention unpacks them), unused by flexattn's, whose deterministic backward needs none
        if dq_write_order_full is not None and dq_write_order is None:
            raise ValueError("dq_write_order_full requires dq_write_order")
        self.dq_write_order, self.dq_write_order_full = dq_write_order, dq_write_order_full
        self.dq_kv_order, self.dq_kv_order_spt = dq_kv_order, dq_kv_order_spt

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks, kv_indices, full_kv_num_blocks=None, full_kv_indices=None,
                       BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE, mask_mod=None, seq_lengths=None,
                       compute_q_blocks=True, *, dq_write_order=None, dq_write_order_full=None, dq_kv_order=None):
        """A BlockMask from the kv-side block lists; the q side is computed by transposition. dq_*: torch's
        metadata for its own deterministic backward (kept, unused by flexattn's kernels; as torch, dq_kv_order a bool
        or a tensor)."""
        if dq_kv_order is not None and not isinstance(dq_kv_order, bool) and not is_torch_tensor(dq_kv_order):
            raise ValueError("dq_kv_order must be a bool, Tensor, or None")
        dq = {"dq_write_order": dq_write_order, "dq_write_order_full": dq_write_order_full,
              "dq_kv_order": None if isinstance(dq_kv_order, bool) else dq_kv_order,
              "dq_kv_order_spt": dq_kv_order if isinstance(dq_kv_order, bool) else None}
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise ValueError("full_kv_num_blocks and full_kv_indices must be both provided or omitted")
        bs = _block_size(BLOCK_SIZE)
        num, idx = _int32(kv_num_blocks, "kv_num_blocks"), _int32(kv_indices, "kv_indices")
        fnum, fidx = _int32(full_kv_num_blocks, "full_kv_num_blocks"), _int32(full_kv_indices, "full_kv_indices")
        if seq_lengths is not None and idx.ndim >= 2:
            # Compact lists (narrower than the kv blocks of seq_lengths, torch's MAX_BLOCKS_IN_COL) are widened:
            # flexattn's layout has a column per kv block.
            ncols = layout.num_blocks(seq_lengths[1], bs[1])
            if idx.shape[-1] < ncols and (fidx is None or fidx.shape == idx.shape):
                idx, fidx = layout.pad_columns(idx, ncols), layout.pad_columns(fidx, ncols)
        layout.check_ordered(num, idx, "kv")
        if fnum is not None:
            layout.check_ordered(fnum, fidx, "full_kv")
            if fidx.shape != idx.shape:
                raise ValueError(f"full_kv_indices has shape {fidx.shape} but kv_indices has shape {idx.shape}")
        q = layout.transpose_ordered(num, idx) if compute_q_blocks else (None, None)
        fq = layout.transpose_ordered(fnum, fidx) if compute_q_blocks and fnum is not None else (None, None)
        if seq_lengths is None:
            seq_lengths = (idx.shape[-2] * bs[0], idx.shape[-1] * bs[1])
        like = kv_num_blocks
        conv = (lambda a: a) if not is_torch_tensor(like) else (lambda a: None if a is None else
                                                                 from_numpy(a, like.device))
        return cls(seq_lengths, conv(num), conv(idx), conv(fnum), conv(fidx), conv(q[0]), conv(q[1]), conv(fq[0]),
                   conv(fq[1]), bs, noop_mask if mask_mod is None else mask_mod, **dq)

    def _np(self, field):
        return _int32(getattr(self, field))

    def as_tuple(self, flatten=True):
        """torch's layout of the torch in this process: with the four dq_* fields after full_q_indices where its
        BlockMask has them (torch >= 2.12; its compiled flex_attention unpacks that many and failed on 13 entries)."""
        bs = self.BLOCK_SIZE if flatten else (self.BLOCK_SIZE,)
        sl = self.seq_lengths if flatten else (self.seq_lengths,)
        dq = tuple(getattr(self, f) for f in _DQ_FIELDS) if _torch_has_dq_fields() else ()
        return (*sl, *(getattr(self, f) for f in _FIELDS), *dq, *bs, self.mask_mod)

    @property
    def shape(self):
        # (as_size: int() of a symbolic batch would specialise torch.export to the example's batch)
        return tuple(layout.as_size(s) for s in self.kv_indices.shape[:-2]) + self.seq_lengths

    @property
    def device(self):
        return device_of(self.kv_num_blocks)

    def numel(self):
        return functools.reduce(operator.mul, self.shape, 1)

    def sparsity(self) -> float:
        """Percent of the mask skipped, as the installed torch computes it (_torch_counts_blocks): by blocks
        (computed blocks over the cdiv block grid; torch since pytorch/pytorch#188868, never negative), or
        without torch or with an older one by area (computed blocks x block area over the unpadded numel)."""
        computed = int(self._np("kv_num_blocks").sum())
        if self.full_kv_num_blocks is not None:
            computed += int(self._np("full_kv_num_blocks").sum())
        if _torch_counts_blocks():
            batch = functools.reduce(operator.mul, (int(s) for s in self.kv_num_blocks.shape[:-1]), 1)
            (lq, lkv), (bq, bkv) = self.seq_lengths, self.BLOCK_SIZE
            grid = batch * -(-lq // bq) * -(-lkv // bkv)
            return 100 * (1 - computed / grid)
        return 100 * (1 - computed * self.BLOCK_SIZE[0] * self.BLOCK_SIZE[1] / self.numel())

    def _dense_np(self):
        dense = layout.ordered_to_dense(self._np("kv_num_blocks"), self._np("kv_indices"))
        if self.full_kv_num_blocks is not None:
            dense |= layout.ordered_to_dense(self._np("full_kv_num_blocks"), self._np("full_kv_indices"))
        return dense

    def to_dense(self):
        """int32 [..., nQ, nKV]: 1 where a tile is computed (partial or full), as torch."""
        return self._like(self._dense_np())

    def tile_classes(self):
        """int8 numpy [..., nQ, nKV]: 0 skipped, 1 partial (mask_mod evaluated), 2 full."""
        cls = layout.ordered_to_dense(self._np("kv_num_blocks"), self._np("kv_indices")).astype(np.int8)
        if self.full_kv_num_blocks is not None:
            full = layout.ordered_to_dense(self._np("full_kv_num_blocks"), self._np("full_kv_indices"))
            cls = np.where(full != 0, 2, cls).astype(np.int8)
        return cls

    def _like(self, a):
        return from_numpy(a, self.kv_num_blocks.device) if is_torch_tensor(self.kv_num_blocks) else a

    def to_string(self, grid_size=(20, 20), limit=4):
        """An ASCII picture of the mask per (batch, head): '█' all computed, '░' some, ' ' none."""
        dense = self._dense_np()
        *batch_dims, num_rows, num_cols = dense.shape
        if grid_size is None or grid_size == -1:
            max_rows, max_cols = num_rows, num_cols
        elif isinstance(grid_size, int):
            max_rows = max_cols = grid_size
        else:
            max_rows, max_cols = grid_size
        row_step = max(1, -(-num_rows // max_rows))
        col_step = max(1, -(-num_cols // max_cols))
        out = []
        for k, bidx in enumerate(itertools.product(*[range(i) for i in batch_dims])):
            if k == limit:
                out += ["...", "To print out more, set BlockMask.to_string(limit=N)",
                        "You can also index (BlockMask[batch, head]) to choose a specific batch or head"]
                break
            cur = dense[bidx]
            vis = f"{bidx}\n"
            for r in range(0, num_rows, row_step):
                for c in range(0, num_cols, col_step):
                    frac = cur[r:r + row_step, c:c + col_step].mean()
                    vis += ("█" if frac == 1 else " " if frac == 0 else "░") * 2
                vis += "\n"
            out.append(vis)
        return "\n".join(out)

    def __str__(self):
        return (f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, \n"
                f"{self.to_string().strip()}\n)")

    def __repr__(self):
        def shape(x):
            return None if x is None else tuple(x.shape)
        fields = ",\n".join(f"    {f}={shape(getattr(self, f))}" for f in _FIELDS)
        name = getattr(self.mask_mod, "__name__", self.mask_mod)
        return (f"BlockMask(\n{fields},\n    BLOCK_SIZE={self.BLOCK_SIZE},\n    shape={self.shape},\n"
                f"    sparsity={self.sparsity():.2f}%,\n    mask_mod={name}\n)")

    def __getitem__(self, index):
        """The mask restricted to batch / head / query-block-row indices (the first <= 3 dims). Integer
        indices keep their dimension (as torch's newest code); the mask_mod becomes an error stub that
        must be replaced (e.g. with an offset for decoding)."""
        index = index if isinstance(index, tuple) else (index,)
        nd = len(self.kv_num_blocks.shape)
        on_torch = is_torch_tensor(self.kv_num_blocks)
        if len(index) > nd:
            raise IndexError(f"BlockMask index has {len(index)} entries, the mask has {nd} leading dims")
        sizes = self.kv_num_blocks.shape
        norm, narrow, q_slices = [], {}, {}
        for d, (i, n) in enumerate(zip(index, sizes)):
            if isinstance(i, (int, np.integer)) or layout.is_sym_int(i):  # a bool too: True is 1, as in torch
                if not -n <= i < n:
                    raise IndexError(f"BlockMask index {i} is out of range for a dimension of size {n}")
                if on_torch:
                    # The row gathered, not sliced: under torch.compile a position is often symbolic (a decode
                    # step's pos // 128; Dynamo shows it as an int), and a slice's bounds checks guard on its value
                    # (a recompile per query block).
                    narrow[d] = layout.as_size(i) % n
                    i = slice(None)
                else:
                    i = int(i) % n
                    i = slice(i, i + 1)
            elif isinstance(i, slice):
                if on_torch and i.step is not None and i.step < 0:  # torch slices take no negative step: gathered
                    q_slices[d] = i  # (the token count follows the slice's rule)
                    i = torch_module().tensor(list(range(n)[i]), dtype=torch_module().int64,
                                              device=self.kv_num_blocks.device)
            elif is_torch_tensor(i) or hasattr(i, "__array__"):  # (after ints and slices: Dynamo cannot trace hasattr)
                # an index array; a 0-d one keeps its dimension too (an index array of one entry: numpy and torch
                # drop the dimension, which left a mask of fewer dims), counting whole blocks as every index array
                if on_torch:
                    torch = torch_module()
                    if not is_torch_tensor(i):
                        i = np.asarray(i)
                        i = i.astype(np.int64) if i.dtype.kind in "iu" else i
                    i = torch.as_tensor(i, device=self.kv_num_blocks.device)
                    # integers of any width index (torch reads uint8 as a bool mask and refuses int8 / int16 / uint*)
                    i = i.to(torch.int64) if not i.is_floating_point() and i.dtype != torch.bool else i
                    i = i.reshape(1) if i.dim() == 0 else i
                else:
                    i = to_numpy(i)
                    i = i.reshape(1) if i.ndim == 0 else i
            norm.append(i)
        ix = tuple(norm)
        if on_torch:  # torch ops on the mask's device: no host copy, and torch.compile traces the slice
            def pick(f):
                t = getattr(self, f)
                if t is None:
                    return None
                for d, i in narrow.items():  # (narrow and slices guard on a symbolic start; a gathered row does not)
                    t = t.index_select(d, torch_module().arange(1, device=t.device) + i)
                return t[ix].contiguous()
        else:
            pick = (lambda f: None if getattr(self, f) is None else self._like(self._np(f)[ix]))
        kv_indices = pick("kv_indices")
        q_len = self.seq_lengths[0]
        if 2 in narrow:  # one query-block row: its tokens (the last row may be partial)
            qb, i = self.BLOCK_SIZE[0], narrow[2]
            q_len = torch_module().sym_min((i + 1) * qb, q_len) - torch_module().sym_min(i * qb, q_len)
        elif len(ix) == 3:  # query-block rows selected: the mask covers their tokens only (torch's rule)
            q_len = self._query_length_for_sliced_blocks(q_slices.get(2, ix[2]), kv_indices.shape[-2])
        if on_torch:
            num, fnum, fidx = pick("kv_num_blocks"), pick("full_kv_num_blocks"), pick("full_kv_indices")
            q = fq = (None, None)
            if self.q_indices is not None:
                q = layout.transpose_ordered_torch(num, kv_indices)
                if fnum is not None:
                    fq = layout.transpose_ordered_torch(fnum, fidx)
            return type(self)((q_len, self.seq_lengths[1]), num, kv_indices, fnum, fidx, *q, *fq, self.BLOCK_SIZE,
                              _sliced_mask_mod_error)
        return BlockMask.from_kv_blocks(pick("kv_num_blocks"), kv_indices, pick("full_kv_num_blocks"),
                                        pick("full_kv_indices"), BLOCK_SIZE=self.BLOCK_SIZE,
                                        mask_mod=_sliced_mask_mod_error, seq_lengths=(q_len, self.seq_lengths[1]),
                                        compute_q_blocks=self.q_indices is not None)

    def _query_length_for_sliced_blocks(self, q_index, selected_q_blocks):
        """The token count of the selected query-block rows: a unit-step slice keeps the rows' tokens (the last
        block holds Q_LEN % Q_BLOCK_SIZE of them when partial); a strided slice counts whole blocks less the last
        block's padding when it is selected; index arrays count whole blocks (torch.nn.attention.flex_attention's
        BlockMask._query_length_for_sliced_blocks)."""
        qb, q_len = self.BLOCK_SIZE[0], self.seq_lengths[0]
        if not isinstance(q_index, slice):
            return selected_q_blocks * qb
        rows = range(self.kv_num_blocks.shape[-1])[q_index]
        if len(rows) == 0:
            return 0
        if rows.step == 1:
            return min(rows.stop * qb, q_len) - min(rows.start * qb, q_len)
        length = len(rows) * qb
        tail = q_len % qb
        if tail and self.kv_num_blocks.shape[-1] - 1 in rows:
            length -= qb - tail
        return length

    def _adjust(self, new_q_len, new_kv_len):
        """The top-left (new_q_len, new_kv_len) crop (block counts rounded up, as newer torch)."""
        rows = layout.num_blocks(new_q_len, self.BLOCK_SIZE[0])
        cols = layout.num_blocks(new_kv_len, self.BLOCK_SIZE[1])

        def crop(num_field, idx_field):
            if getattr(self, num_field) is None:
                return None, None
            dense = layout.ordered_to_dense(self._np(num_field), self._np(idx_field))[..., :rows, :cols]
            return tuple(self._like(a) for a in layout.dense_to_ordered(dense))

        num, idx = crop("kv_num_blocks", "kv_indices")
        fnum, fidx = crop("full_kv_num_blocks", "full_kv_indices")
        return BlockMask.from_kv_blocks(num, idx, fnum, fidx, self.BLOCK_SIZE, self.mask_mod,
                                        seq_lengths=(new_q_len, new_kv_len))

    def to(self, device):
        """A copy with every index tensor on `device` ('numpy' for numpy arrays)."""
        dev = resolve_device(device)
        moved = [None if getattr(self, f) is None else from_numpy(self._np(f), dev) for f in _FIELDS]
        dq = {f: getattr(self, f) for f in _DQ_FIELDS}  # torch's metadata, moved too where it is a tensor
        dq = {f: v.to(dev) if is_torch_tensor(v) and not isinstance(dev, str) else v for f, v in dq.items()}
        return BlockMask(self.seq_lengths, *moved, self.BLOCK_SIZE, self.mask_mod, **dq)


def check_mask_mod(mask_mod):
    """create_block_mask's argument check (the numpy / CPU and the CUDA builds)."""
    kind = mod_kind(mod_callable(mask_mod))
    if kind not in ("mask_mod", None):  # None: a signature that does not tell (*args); the slot decides
        raise TypeError(f"create_block_mask requires a mask_mod function (4 parameters b, h, q_idx, kv_idx), got "
                        f"a {kind} {getattr(mask_mod, '__qualname__', mask_mod)!r}")


@functools.lru_cache(maxsize=None)
def _torch_compatible_class():
    """flexattn's BlockMask under torch's as a second base: flexattn's fields and methods (first in the MRO), and
    isinstance(mask, torch.nn.attention.flex_attention.BlockMask) holds."""
    import importlib

    torch_block_mask = importlib.import_module("torch.nn.attention.flex_attention").BlockMask
    _torch_has_dq_fields()  # probed here, eagerly: as_tuple may first run inside Dynamo, which cannot trace inspect
    return type("BlockMask", (BlockMask, torch_block_mask), {"__init__": BlockMask.__init__, "__module__": __name__,
                                                             "__qualname__": "BlockMask"})


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device=None, BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE,
                      _compile=False, separate_full_blocks=True, compute_dq_write_order=False, dq_kv_order=True):
    """The BlockMask of `mask_mod` for (B, H, Q_LEN, KV_LEN); B or H None means 1 (broadcast).

    Tiles are classified by evaluating the traced mask_mod in chunks of query-block rows (the dense mask
    of the whole problem never exists at once); padding past the lengths counts as masked, so tail tiles
    are never full. Tensors are numpy arrays unless a torch device applies (see resolve_device).
    separate_full_blocks=False (as torch): every non-empty tile in kv_*, full_kv_* None, so mask_mod runs on
    every tile (the same result, slower). compute_dq_write_order / dq_kv_order: torch's precomputed metadata
    for its deterministic backward, accepted for compatibility; flexattn's deterministic backward needs none."""
    torch = torch_module()
    if torch is not None and torch.compiler.is_compiling():  # a graph node (flexattn._torch_api._block_mask_in_graph)
        from . import _torch_api

        dev = resolve_device(device)
        return _torch_api.create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, "cpu" if isinstance(dev, str) else dev,
                                            BLOCK_SIZE, separate_full_blocks=separate_full_blocks)  # (no numpy in a graph)
    if not separate_full_blocks:
        bm = create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device, BLOCK_SIZE, _compile)
        return _without_full_blocks(bm)
    check_mask_mod(mask_mod)
    if _compile:
        warnings.warn("create_block_mask(_compile=True) is deprecated in torch and has no effect in flexattn",
                      DeprecationWarning, stacklevel=2)
    B, H, Q_LEN, KV_LEN = _check_sizes(B=B, H=H, Q_LEN=Q_LEN, KV_LEN=KV_LEN)
    QB, KVB = _block_size(BLOCK_SIZE)
    dev = resolve_device(device)
    if _native.load() is not None:
        if getattr(dev, "type", None) == "cuda":  # built on the GPU (flexattn._torch_api)
            from . import _torch_api

            return _torch_api.create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, dev, (QB, KVB))
        arrays = _native.build_block_mask_numpy(trace(mask_mod, "mask_mod"), B, H, Q_LEN, KV_LEN, QB, KVB)
        bm = BlockMask((Q_LEN, KV_LEN), *arrays, (QB, KVB), mask_mod)
        return bm if isinstance(dev, str) else bm.to(dev)
    counts = layout.tile_counts(trace(mask_mod, "mask_mod"), B, H, Q_LEN, KV_LEN, QB, KVB)
    full = counts == QB * KVB
    partial = (counts > 0) & ~full
    num, idx = layout.dense_to_ordered(partial)
    fnum, fidx = layout.dense_to_ordered(full)
    bm = BlockMask.from_kv_blocks(num, idx, fnum, fidx, (QB, KVB), mask_mod, seq_lengths=(Q_LEN, KV_LEN))
    return bm if isinstance(dev, str) else bm.to(dev)


def _without_full_blocks(bm):
    """bm with its full tiles moved into the partial lists (kv and q sides), full_* None (through host arrays:
    separate_full_blocks=False is a compatibility option, not a fast path)."""
    if bm.full_kv_num_blocks is None:
        return bm
    dense = (layout.ordered_to_dense(bm._np("kv_num_blocks"), bm._np("kv_indices"))
             | layout.ordered_to_dense(bm._np("full_kv_num_blocks"), bm._np("full_kv_indices")))
    num, idx = (bm._like(a) for a in layout.dense_to_ordered(dense))
    return BlockMask.from_kv_blocks(num, idx, BLOCK_SIZE=bm.BLOCK_SIZE, mask_mod=bm.mask_mod,
                                    seq_lengths=bm.seq_lengths, compute_q_blocks=bm.q_indices is not None)


def empty_block_mask(like=None):
    """The mask flex_attention uses when block_mask is None: one tile covering everything."""
    bm = BlockMask.from_kv_blocks(np.ones((1, 1, 1), np.int32), np.zeros((1, 1, 1, 1), np.int32),
                                  BLOCK_SIZE=_LARGE_SPARSE_BLOCK_SIZE, seq_lengths=(1, 1))
    if like is not None and is_torch_tensor(like):
        return bm.to(like.device)
    return bm


def is_empty_block_mask(bm) -> bool:
    return bm.BLOCK_SIZE == (_LARGE_SPARSE_BLOCK_SIZE, _LARGE_SPARSE_BLOCK_SIZE)


__all__ = ["BlockMask", "create_block_mask"]
