"""Mask combinators and create_mask, as in torch.nn.attention.flex_attention."""
from __future__ import annotations

import operator

import numpy as np

from ._arrays import from_numpy, is_torch_tensor, resolve_device, torch_module
from ._block_layout import mask_rows
from ._tracer import trace


def _constant_like(batch, value):
    """value as torch's mask helpers return it: a 0-d bool tensor on batch's device when batch is a torch tensor (torch
    vmaps mask_mods and refuses a Python bool: torch's create_mask / create_block_mask failed on flexattn's noop_mask
    and on masks whose default mask_mod it is); else the Python bool (flexattn's tracer and numpy paths)."""
    if is_torch_tensor(batch):
        return batch.new_full((), value, dtype=torch_module().bool)
    return value


def noop_mask(batch, head, token_q, token_kv):
    """A mask_mod that keeps every position."""
    return _constant_like(batch, True)


def _check_callables(mask_mods):
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")


def and_masks(*mask_mods):
    """A mask_mod that is the intersection of `mask_mods` (True if there are none)."""
    _check_callables(mask_mods)

    def and_mask(b, h, q_idx, kv_idx):
        result = _constant_like(b, True)
        for mask in mask_mods:
            result = result & mask(b, h, q_idx, kv_idx)
        return result

    return and_mask


def or_masks(*mask_mods):
    """A mask_mod that is the union of `mask_mods` (False if there are none)."""
    _check_callables(mask_mods)

    def or_mask(b, h, q_idx, kv_idx):
        result = _constant_like(b, False)
        for mask in mask_mods:
            result = result | mask(b, h, q_idx, kv_idx)
        return result

    return or_mask


def _check_sizes(**sizes):
    """The sizes as Python ints (B or H None: 1, broadcast). torch takes any integral value (64.0, a 0-d tensor of
    shape arithmetic), so does this; a size below 1 has no mask to build."""
    out = []
    for name, v in sizes.items():
        if v is None and name in ("B", "H"):
            v = 1
        try:
            n = operator.index(v)
        except TypeError:
            n = int(v) if isinstance(v, (float, np.floating)) and float(v).is_integer() else None
            if n is None and hasattr(v, "item") and getattr(v, "shape", None) == ():  # a 0-d tensor or array
                item = v.item()
                n = int(item) if isinstance(item, (int, float)) and float(item).is_integer() else None
        if n is None or isinstance(v, bool) or n < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
        out.append(n)
    return out


def create_mask(mod_fn, B, H, Q_LEN, KV_LEN, device=None):
    """The dense mask of a mask_mod (or of a score_mod: False where it gives -inf), bool [B, H, Q_LEN,
    KV_LEN]. B or H None means 1. A numpy array unless a torch device applies (see resolve_device)."""
    B, H, Q_LEN, KV_LEN = _check_sizes(B=B, H=H, Q_LEN=Q_LEN, KV_LEN=KV_LEN)
    dev = resolve_device(device)
    mask = np.ascontiguousarray(mask_rows(trace(mod_fn), B, H, 0, Q_LEN, KV_LEN))
    return from_numpy(mask, dev)
