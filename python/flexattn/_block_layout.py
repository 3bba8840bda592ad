"""numpy implementations of torch's BlockMask layout helpers (torch/nn/attention/flex_attention.py):
ordered <-> dense block maps, transposition, and building tile classes from a mask_mod."""
from __future__ import annotations

import numpy as np

from ._arrays import is_torch_tensor, torch_module

# Dense mask elements evaluated per chunk when building a block mask: bounds memory at a few hundred MB.
_CHUNK_ELEMENTS = 1 << 24


def check_ordered(num, idx, what: str):
    """Raises ValueError unless (num, idx) is a valid ordered block list: idx at least 2-D, num of shape
    idx.shape[:-1], counts in [0, ncols] and the first `count` indices of each row in [0, ncols)."""
    if idx.ndim < 2:
        raise RuntimeError("BlockMask must have at least 2 dimensions")
    if num.shape != idx.shape[:-1]:
        raise ValueError(f"{what}_num_blocks has shape {tuple(num.shape)} but {what}_indices has shape "
                         f"{tuple(idx.shape)}: expected {what}_num_blocks of shape {tuple(idx.shape[:-1])}")
    cols = idx.shape[-1]
    if num.size and (num.min() < 0 or num.max() > cols):
        raise ValueError(f"{what}_num_blocks must be in [0, {cols}] (the last dimension of {what}_indices), got "
                         f"values in [{num.min()}, {num.max()}]")
    valid = np.arange(cols) < num[..., None]
    bad = valid & ((idx < 0) | (idx >= cols))
    if bad.any():
        raise ValueError(f"{what}_indices must be in [0, {cols}) in the first {what}_num_blocks entries of each "
                         f"row, got {idx[bad].ravel()[0]}")


def is_sym_int(x):
    """Whether x is a torch.SymInt (torch.export's symbolic sizes; under Dynamo they pass for ints)."""
    torch = torch_module()
    return torch is not None and isinstance(x, torch.SymInt)


def as_size(x):
    """x as an int, or as itself where it is a symbolic size (torch.SymInt under torch.compile with dynamic shapes:
    int() would specialise the graph on its value)."""
    if isinstance(x, int):  # (under Dynamo a symbolic size passes for an int)
        return x
    return x if is_sym_int(x) else int(x)


def wrapped_lead(a, lead):
    """a [Bm, Hm, ...] (a block mask field, numpy or torch) read as torch's kernels read a mask whose batch / heads are
    neither 1 nor the query's: row (b % Bm, h % Hm), gathered to lead = the query's (B, Hq), which the backends take
    (e.g. a mask built with the kv heads under GQA). a itself where no dimension wraps."""
    for dim, n in enumerate(lead):
        m = a.shape[dim]
        if m != 1 and m != n:
            if is_torch_tensor(a):
                torch = torch_module()
                a = a.index_select(dim, torch.arange(n, device=a.device) % m)
            else:
                a = np.ascontiguousarray(np.take(a, np.arange(n) % m, axis=dim))
    return a


def num_blocks(length, block):
    """Blocks of `block` tokens covering `length` (the last one partial)."""
    return -(-as_size(length) // as_size(block))


def pad_columns(idx, ncols):
    """idx [..., rows, w] (numpy array or torch tensor) widened to ncols columns with zeros when w < ncols:
    torch's ordered lists may be compact (w = the most tiles any row has), every flexattn consumer takes one
    column per kv block (only the first count entries of a row are read, so the padding is never used)."""
    if idx is None or idx.shape[-1] >= ncols:
        return idx
    shape = tuple(idx.shape[:-1]) + (ncols - idx.shape[-1],)
    if is_torch_tensor(idx):
        return torch_module().cat([idx, idx.new_zeros(shape)], dim=-1)
    return np.ascontiguousarray(np.concatenate([idx, np.zeros(shape, idx.dtype)], axis=-1))


def ordered_to_dense(num, idx):
    """[..., rows] counts + [..., rows, cols] indices -> [..., rows, cols] int32 0/1 map."""
    cols = idx.shape[-1]
    valid = np.arange(cols) < num[..., None]
    dense = np.zeros(idx.shape[:-1] + (cols + 1,), np.int32)
    np.put_along_axis(dense, np.where(valid, idx, cols).astype(np.int64), 1, axis=-1)  # spill column
    return dense[..., :cols]


def dense_to_ordered(dense):
    """0/1 map -> (counts, indices): active columns first, ascending; then the rest ascending."""
    dense = dense.astype(np.int32)
    num = dense.sum(axis=-1).astype(np.int32)
    idx = np.argsort(-dense, axis=-1, kind="stable").astype(np.int32)
    return np.ascontiguousarray(num), np.ascontiguousarray(idx)


def transpose_ordered(num, idx):
    return dense_to_ordered(np.swapaxes(ordered_to_dense(num, idx), -2, -1))


def transpose_ordered_torch(num, idx):
    """transpose_ordered in torch ops on the tensors' device (BlockMask slices of torch masks: no host copy, and
    torch.compile traces it; numpy would break the graph)."""
    torch = torch_module()
    cols = idx.shape[-1]
    valid = torch.arange(cols, device=idx.device) < num[..., None]
    spill = torch.where(valid, idx, cols).to(torch.int64)  # past the last column: one spill column, dropped
    dense = torch.zeros(*idx.shape[:-1], cols + 1, dtype=torch.int32, device=idx.device).scatter_(-1, spill, 1)
    dense_t = dense[..., :cols].transpose(-2, -1)
    # stable, descending: active columns first, each group ascending (dense_to_ordered's order)
    order = torch.argsort(dense_t, dim=-1, descending=True, stable=True)
    return dense_t.sum(-1, dtype=torch.int32).contiguous(), order.to(torch.int32).contiguous()


def mask_rows(mask, B, H, q0, q1, KV):
    """The mask_mod (a TracedMod) over query rows [q0, q1): bool [B, H, q1 - q0, KV]."""
    b = np.arange(B, dtype=np.int64)[:, None, None, None]
    h = np.arange(H, dtype=np.int64)[None, :, None, None]
    q = np.arange(q0, q1, dtype=np.int64)[None, None, :, None]
    kv = np.arange(KV, dtype=np.int64)[None, None, None, :]
    if mask.kind == "score_mod":  # create_mask accepts score_mods: masked where the mod gives -inf
        out = mask.evaluate(score=np.zeros(()), b=b, h=h, q_idx=q, kv_idx=kv)
        m = out != -np.inf
    else:
        m = mask.evaluate(b=b, h=h, q_idx=q, kv_idx=kv)
    return np.broadcast_to(m, (B, H, q1 - q0, KV))


def tile_counts(mask, B, H, Q, KV, QB, KVB):
    """Number of True elements per (b, h, q-block, kv-block) tile; padding past the lengths is False."""
    nq, nkv = -(-Q // QB), -(-KV // KVB)
    counts = np.zeros((B, H, nq, nkv), np.int64)
    rows_per_chunk = max(1, _CHUNK_ELEMENTS // max(1, B * H * QB * nkv * KVB))
    for r0 in range(0, nq, rows_per_chunk):
        r1 = min(nq, r0 + rows_per_chunk)
        q0, q1 = r0 * QB, min(Q, r1 * QB)
        m = np.zeros((B, H, (r1 - r0) * QB, nkv * KVB), np.bool_)
        m[:, :, : q1 - q0, :KV] = mask_rows(mask, B, H, q0, q1, KV)
        counts[:, :, r0:r1] = m.reshape(B, H, r1 - r0, QB, nkv, KVB).sum(axis=(3, 5))
    return counts
