"""flex_attention: torch's API and validation, on numpy arrays, DLPack producers or torch tensors."""
from __future__ import annotations

import math
import warnings
from typing import Any, NamedTuple, Optional

import numpy as np

from . import _native, _reference
from ._arrays import dtype_name, is_array_like, is_torch_tensor, like, to_numpy, torch_module
from ._block_layout import wrapped_lead
from ._tracer import trace
from .block_mask import _FIELDS, BlockMask, empty_block_mask, is_empty_block_mask

_FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
_BACKENDS = ("AUTO", "TRITON", "FLASH", "TRITON_DECODE", "FLYDSL")


class AuxRequest(NamedTuple):
    """Which auxiliary outputs flex_attention(return_aux=...) returns."""

    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """lse: natural-log logsumexp [B, Hq, L]; max_scores: row max of the modified scores [B, Hq, L]."""

    lse: Optional[Any] = None
    max_scores: Optional[Any] = None


class ShapeError(ValueError, RuntimeError):
    """A shape mismatch torch reports as RuntimeError (a block mask made for another length, key and value of other
    shapes) where flexattn raised ValueError: caught as either, so code written for torch's or flexattn's type works."""


def _validate_inputs(query, key, value):
    for name, x in (("query", query), ("key", key), ("value", value)):
        if not is_array_like(x):
            raise TypeError(f"flex_attention: {name} must be a numpy array, a torch tensor or a DLPack producer, "
                            f"got {type(x).__name__}")
    if len({is_torch_tensor(x) for x in (query, key, value)}) != 1:
        raise TypeError("flex_attention: query, key and value must all be torch tensors or all be arrays")
    dts = [dtype_name(x.dtype) for x in (query, key, value)]
    if len(set(dts)) != 1:
        raise ValueError(f"Expected query, key, and value to have the same dtype, but got query.dtype: {dts[0]}, "
                         f"key.dtype: {dts[1]}, and value.dtype: {dts[2]} instead.")
    if is_torch_tensor(query) and len({str(x.device) for x in (query, key, value)}) != 1:
        raise ValueError(f"Expected query, key, and value to have the same device type, but got query.device: "
                         f"{query.device}, key.device: {key.device}, and value.device: {value.device} instead.")
    if dts[0] not in _FLOAT_DTYPES:
        raise ValueError(f"flex_attention: query, key and value must be float16, bfloat16, float32 or float64, "
                         f"got {dts[0]}")
    _validate_shapes(query, key, value)


def _validate_shapes(query, key, value):
    """torch's shape checks and messages (arrays or torch tensors; the torch path's _validate calls it too)."""
    if any(len(x.shape) < 2 for x in (query, key, value)):  # (torch's check before the 4-D one)
        raise ValueError(f"Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: "
                         f"{len(query.shape)}, key.dim: {len(key.shape)} and value.dim: {len(value.shape)} instead.")
    if any(len(x.shape) != 4 for x in (query, key, value)):
        raise NotImplementedError("NYI: query, key, and value must be 4D tensors")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(f"Expect query and key/value to have the same embedding dimension but got "
                         f"E={query.shape[-1]} and E={key.shape[-1]}.")
    if key.shape[:3] != value.shape[:3]:
        raise ShapeError(f"Expect key and value to have the same batch size, heads and length, but got key shape "
                         f"{tuple(key.shape)} and value shape {tuple(value.shape)}.")


def _validate_heads_and_batch(query, key, enable_gqa, block_mask):
    Hq, Hkv = query.shape[1], key.shape[1]
    if not enable_gqa and Hq != Hkv:
        raise ValueError(f"Expect query and key/value to have the same number of heads but got Hq={Hq} and "
                         f"Hkv={Hkv}. Try setting enable_gqa=True for GQA.")
    if enable_gqa and Hq % Hkv != 0:
        raise ValueError(f"Expect number of query heads to be a multiple of kv heads for GQA but got Hq={Hq} and "
                         f"Hkv={Hkv}.")
    Bq, Bkv = query.shape[0], key.shape[0]
    if Bq != Bkv:
        if block_mask is None:
            raise ValueError(f"Expect query and key/value to have the same batch size, or non-none block_mask, "
                             f"but got block_mask=None, Bq={Bq}, and Bkv={Bkv}.")
        b_mask = block_mask.kv_num_blocks.shape[0]
        if b_mask != Bq:
            raise ValueError(f"Expect query and key/value to have the same batch size, or block_mask and query to "
                             f"have the same batch size, but got Bq={Bq}, Bkv={Bkv}, B_block_mask={b_mask}.")
        if Bkv != 1:
            raise ValueError(f"Expect key/value batch size to be 1 (broadcast) or the query batch size, but got "
                             f"Bq={Bq} and Bkv={Bkv}.")


def _wrapped_lead(block_mask, lead):
    """The mask with each field read as torch's kernels read a batch / heads that are neither 1 nor the query's
    (_block_layout.wrapped_lead); the mask itself where nothing wraps."""
    num = block_mask.kv_num_blocks
    if len(num.shape) != 3 or all(m in (1, n) for m, n in zip(num.shape[:2], lead)):
        return block_mask
    fields = (None if getattr(block_mask, f) is None else block_mask._like(wrapped_lead(block_mask._np(f), lead))
              for f in _FIELDS)
    return type(block_mask)(block_mask.seq_lengths, *fields, block_mask.BLOCK_SIZE, block_mask.mask_mod)


def _validate_block_mask(query, key, block_mask):
    if is_empty_block_mask(block_mask):
        return
    q_len, kv_len = block_mask.seq_lengths
    L, S = query.shape[-2], key.shape[-2]
    if L > q_len or S > kv_len:
        shape = block_mask.shape
        raise ShapeError(f"block_mask was created for block_mask.shape={shape} but got q_len={L} and kv_len={S}. "
                         "As the block mask was created for a smaller length than you're using it for, you likely "
                         "need to create a new block mask.")
    if L < q_len or S < kv_len:
        shape = block_mask.shape
        raise ShapeError(f"block_mask was created for block_mask.shape={shape} but got q_len={L} and kv_len={S}. "
                         "As the block mask was created for a larger length than you're using it for, you can "
                         "either 1. create a new block mask with the correct length, or 2. 'adjust' the existing "
                         "block mask to the correct length by calling block_mask._adjust(q_len, kv_len). This "
                         "essentially 'crops' the block mask to the upper left corner, which does not work for "
                         "all mask_mods!")
    if is_torch_tensor(query) and is_torch_tensor(block_mask.kv_num_blocks):
        if query.device != block_mask.kv_num_blocks.device:
            raise RuntimeError(f"Expect q/k/v and block_mask to be on the same device but got {query.device} and "
                               f"{block_mask.kv_num_blocks.device}.")


def _kernel_options(kernel_options):
    opts = {} if kernel_options is None else dict(kernel_options)
    if "OUTPUT_LOGSUMEXP" in opts:
        raise ValueError("kernel_options: OUTPUT_LOGSUMEXP is decided by flex_attention (return_aux / "
                         "return_lse), it may not be set")
    if "OUTPUT_MAX" in opts:
        raise ValueError("kernel_options: OUTPUT_MAX is decided by flex_attention (return_aux), it may not be set")
    if "BACKEND" in opts and opts.get("FORCE_USE_FLEX_ATTENTION", False):
        raise RuntimeError("kernel_options: BACKEND cannot be combined with legacy FORCE_USE_FLEX_ATTENTION (as in "
                           "torch: BACKEND supersedes it; drop FORCE_USE_FLEX_ATTENTION)")
    backend = opts.get("BACKEND", "AUTO")
    if backend not in _BACKENDS:
        raise ValueError(f"kernel_options: BACKEND must be one of {', '.join(_BACKENDS)}, got {backend!r}")
    return opts


def _check_scale(scale):
    """scale as a float; ValueError unless finite. The native calls read NaN as "1/sqrt(E)", so a NaN the caller
    computed would silently become the default (torch returns NaNs); flexattn's rule is a clear error instead."""
    if scale is None:
        return None
    value = float(scale)
    if not math.isfinite(value):
        raise ValueError(f"scale: expected a finite number or None, got {value}")
    return value


def _check_no_grad(query, key, value):
    torch = torch_module()
    if torch is not None and torch.is_grad_enabled() and any(
            is_torch_tensor(x) and x.requires_grad for x in (query, key, value)):
        raise NotImplementedError("flexattn: the backward pass is not available from Python yet; run under "
                                  "torch.no_grad() or pass tensors that do not require grad")


def _backend_forward(query, key, value, score_mod, mask_mod, block_mask, scale, enable_gqa, kernel_options,
                     need_lse, need_max):
    """The one seam between the Python API and a backend. Arguments are validated; score_mod / mask_mod
    are TracedMods (score_mod None = identity). Returns (out, lse, max) of the input's kind (torch tensors
    on the input's device, else numpy); lse / max are None unless requested.

    Today: the pure-numpy reference (flexattn._reference). The compiled backends replace this body."""
    # The native cpu backend (float64 throughout). float16 keeps the numpy reference, which rounds P to
    # float16 before P @ v exactly as torch's eager path does.
    if not is_torch_tensor(query) and dtype_name(query.dtype) != "float16" and _native.load() is not None:
        return _native.cpu_forward_numpy(query, key, value, score_mod, mask_mod, block_mask, scale, need_lse,
                                         need_max)
    qn, kn, vn = (to_numpy(x) for x in (query, key, value))
    qdt = dtype_name(query.dtype)
    groups = query.shape[1] // key.shape[1] if enable_gqa else 1
    out, lse, mx = _reference.forward(qn, kn, vn, qdt, score_mod, mask_mod, block_mask.tile_classes(),
                                      block_mask.BLOCK_SIZE, scale, groups)
    stat_dtype = np.float64 if qdt == "float64" else np.float32
    out_np = out.astype(np.float32 if qdt == "bfloat16" else qdt)
    if is_torch_tensor(query):
        res = like(out_np, query, dtype=query.dtype)
        stat = (lambda a: like(a.astype(stat_dtype), query))
    else:
        res, stat = out_np, (lambda a: a.astype(stat_dtype))
    return res, stat(lse) if need_lse else None, stat(mx) if need_max else None


def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                   return_lse=False, kernel_options=None, *, return_aux=None):
    """Attention with a programmable score_mod and a block-sparse mask, with torch.nn.attention.flex_attention's
    semantics: query [B, Hq, L, E], key [Bkv, Hkv, S, E], value [Bkv, Hkv, S, Ev] -> out [B, Hq, L, Ev].

    Inputs are numpy arrays (or DLPack producers) or torch tensors; outputs are of the same kind. Forward
    only. Returns out, (out, AuxOutput) with return_aux, or (out, lse) with the deprecated return_lse."""
    if is_torch_tensor(query) and _native.load() is not None:
        # torch tensors with the extension: custom ops with autograd and torch.compile support.
        from . import _torch_api

        return _torch_api.flex_attention(query, key, value, score_mod, block_mask, scale, enable_gqa, return_lse,
                                         kernel_options, return_aux=return_aux)
    _validate_inputs(query, key, value)
    _validate_heads_and_batch(query, key, enable_gqa, block_mask)
    traced_score = None if score_mod is None else trace(score_mod, "score_mod")
    if block_mask is None:
        block_mask = empty_block_mask(query)
    elif not isinstance(block_mask, BlockMask):  # e.g. torch's own BlockMask: same fields
        block_mask = BlockMask(block_mask.seq_lengths, *(getattr(block_mask, f, None) for f in _FIELDS),
                               block_mask.BLOCK_SIZE, block_mask.mask_mod)
    _validate_block_mask(query, key, block_mask)
    block_mask = _wrapped_lead(block_mask, query.shape[:2])
    traced_mask = trace(block_mask.mask_mod, "mask_mod")
    scale = _check_scale(scale)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    if return_lse and return_aux is not None:
        raise ValueError("Cannot specify both return_lse and return_aux. return_lse is deprecated, use "
                         "return_aux=AuxRequest(lse=True)")
    if return_lse:
        warnings.warn("return_lse is deprecated and will be removed; use return_aux=AuxRequest(lse=True)",
                      FutureWarning, stacklevel=2)
    opts = _kernel_options(kernel_options)
    _check_no_grad(query, key, value)
    need_lse = bool(return_lse or (return_aux is not None and return_aux.lse))
    need_max = bool(return_aux is not None and return_aux.max_scores)
    out, lse, mx = _backend_forward(query, key, value, traced_score, traced_mask, block_mask, float(scale),
                                    enable_gqa, opts, need_lse, need_max)
    if return_aux is not None:
        return out, AuxOutput(lse=lse, max_scores=mx)
    if return_lse:
        return out, lse
    return out
