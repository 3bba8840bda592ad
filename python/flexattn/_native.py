"""The compiled extension flexattn._C (bindings/), imported on first use so that `import flexattn`
works without it.

FLEXATTN_NATIVE_DIR=<dir>: load _C from that folder (a CMake build's bindings/ folder) instead of the
installed package. FLEXATTN_REQUIRE_NATIVE=1: a missing or broken extension is an ImportError instead of
a silent fallback to the numpy reference (CI uses it so a broken build cannot pass as the fallback).
"""
from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import os
import sys

from ._env import env_flag

_state = {"loaded": False, "module": None, "error": None}


def _load_from(folder):
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(folder, "_C" + suffix)
        if os.path.exists(path):
            spec = importlib.util.spec_from_file_location("flexattn._C", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sys.modules["flexattn._C"] = module
            return module
    raise ImportError(f"no _C extension ({', '.join(importlib.machinery.EXTENSION_SUFFIXES)}) in "
                      f"FLEXATTN_NATIVE_DIR={folder}")


def load():
    """The extension module, or None if it is not available (the reason is in error())."""
    if not _state["loaded"]:
        _state["loaded"] = True
        folder = os.environ.get("FLEXATTN_NATIVE_DIR")
        try:
            if folder:
                _state["module"] = _load_from(folder)
            else:
                from . import _C

                _state["module"] = _C
        except ImportError as e:
            _state["error"] = str(e)
        if _state["module"] is not None and hasattr(_state["module"], "set_python_sites"):
            try:
                _state["module"].set_python_sites(_python_sites())
            except Exception:  # noqa: BLE001 - a search hint: $VIRTUAL_ENV and the toolkit are searched anyway
                pass
    if _state["module"] is None and env_flag("FLEXATTN_REQUIRE_NATIVE", False):  # (true / yes / on too, as every flag)
        raise ImportError(f"FLEXATTN_REQUIRE_NATIVE={os.environ['FLEXATTN_REQUIRE_NATIVE']} but flexattn._C could not "
                          f"be loaded: {_state['error']}")
    return _state["module"]


def _python_sites():
    """This interpreter's package folders, where pip puts torch's NVRTC wheel (nvidia/cu13/lib): the native search
    found it through $VIRTUAL_ENV only, so `venv/bin/python` without an activated venv fell back to the toolkit."""
    import site

    dirs = list(getattr(site, "getsitepackages", lambda: [])())
    user = getattr(site, "getusersitepackages", lambda: None)()
    # (no sys.path scan: its other folders are $PYTHONPATH's, which the native search reads itself)
    return [d for d in dirs + [user] if isinstance(d, str)]


def error():
    """Why load() returned None, or None."""
    load()
    return _state["error"]


# ---- what the backends share (numpy cpu path, torch ops) -----------------------------------------------
def require(what="this call"):
    """The extension module, or ImportError saying how to build it."""
    module = load()
    if module is None:
        raise ImportError(f"flexattn: {what} needs the compiled extension flexattn._C, which is not available "
                          f"({error()}). Build it with `pip install .`, or with CMake "
                          "(-DFLEXATTN_BUILD_PYTHON=ON) and FLEXATTN_NATIVE_DIR=<build>/bindings.")
    return module


_NOOP_TEXTS = ("true", "true{bool}")


@functools.lru_cache(maxsize=1024)
def parsed_mod(text, kind, buffer_dtypes=(), scalar_types=(), renames=()):
    """_C.Mod of `text` (cached: the kernel caches key on the parsed nodes), with `renames` applied."""
    m = require().Mod(text, kind, dict(buffer_dtypes), dict(scalar_types))
    return m.renamed(dict(renames)) if renames else m


class Merged:
    """A score_mod and a mask_mod (TracedMods) in the one namespace of scalars and buffers that a
    variant has. A mask_mod name that the score_mod also uses gets a fresh name (suffix _m, _m1, ...), so
    two different captured values never share a slot; the same tensor captured by both is simply bound
    twice.

    score / mask: (text, kind, buffer_dtypes, scalar_types, renames) keys for parsed_mod(), or None;
    scalars / buffers: [(variant name, mod index 0 = score / 1 = mask, name inside that mod)], sorted."""

    def __init__(self, score, mask):
        self.score = None if score is None else _mod_key(score, ())
        if mask is not None and mask.text in _NOOP_TEXTS:
            mask = None
        taken = set() if score is None else set(score.scalars) | set(score.buffers)
        renames = {}
        if mask is not None:
            for name in sorted(set(mask.scalars) | set(mask.buffers)):
                if name in taken:
                    new, i = name + "_m", 1
                    while new in taken or new in mask.scalars or new in mask.buffers:
                        new, i = f"{name}_m{i}", i + 1
                    renames[name] = new
                    taken.add(new)
        self.mask = None if mask is None else _mod_key(mask, tuple(sorted(renames.items())))
        self.scalars, self.buffers = [], []
        for idx, t, ren in ((0, score, {}), (1, mask, renames)):
            if t is None:
                continue
            self.scalars += [(ren.get(n, n), idx, n) for n in t.scalars]
            self.buffers += [(ren.get(n, n), idx, n) for n in t.buffers]
        self.scalars.sort()
        self.buffers.sort()

    def variant(self, grad_buffers=()):
        return variant_of(self.score, self.mask, tuple(grad_buffers))

    def values(self, score, mask):
        """({variant name: scalar value}, {variant name: captured buffer}) of the two TracedMods."""
        mods = (score, mask)
        return ({v: mods[i].scalars[n] for v, i, n in self.scalars},
                {v: mods[i].buffers[n] for v, i, n in self.buffers})


def _mod_key(t, renames):
    return (t.text, t.kind, tuple(sorted(t.buffer_dtypes.items())), tuple(sorted(t.scalar_types.items())), renames)


@functools.lru_cache(maxsize=1024)
def variant_of(score_key, mask_key, grad_buffers=()):
    C = require()
    score = None if score_key is None else parsed_mod(*score_key)
    mask = None if mask_key is None else parsed_mod(*mask_key)
    return C.Variant(score, mask, list(grad_buffers))


def host_mask_arg(block_mask, to_host):
    """The cpu backend's block-mask tuple for a BlockMask (index arrays through `to_host`), or None for the
    mask flex_attention uses when block_mask is None (dense: mask_mod everywhere)."""
    from .block_mask import is_empty_block_mask

    if is_empty_block_mask(block_mask):
        return None
    q_len, kv_len = block_mask.seq_lengths
    qb, kvb = block_mask.BLOCK_SIZE

    def arr(x, nd):
        if x is None:
            return None
        a = to_host(x)
        return a.reshape((1,) * (nd - a.ndim) + tuple(a.shape)) if a.ndim < nd else a

    from ._block_layout import num_blocks, pad_columns

    nkv = num_blocks(kv_len, kvb)  # torch's compact lists widened to a column per kv block
    return (int(q_len), int(kv_len), int(qb), int(kvb), arr(block_mask.kv_num_blocks, 3),
            pad_columns(arr(block_mask.kv_indices, 4), nkv), arr(block_mask.full_kv_num_blocks, 3),
            pad_columns(arr(block_mask.full_kv_indices, 4), nkv))


def cpu_forward_numpy(query, key, value, score_mod, mask_mod, block_mask, scale, need_lse, need_max):
    """flex_attention's forward on host arrays through the native cpu backend (float64 math).
    score_mod / mask_mod are TracedMods (score_mod None = identity). Returns (out in the query's dtype,
    lse, max) with lse / max float64 for float64 queries, else float32, and None unless requested."""
    import numpy as np

    from ._arrays import dtype_name, to_numpy

    C = require("the cpu backend")
    merged = Merged(score_mod, mask_mod)
    scalars, buffers = merged.values(score_mod, mask_mod)
    host_buffers = {}
    for name, b in buffers.items():
        host_buffers[name] = _host_buffer(to_numpy(b))
    q, k, v = (to_numpy(x) for x in (query, key, value))
    mask = host_mask_arg(block_mask, lambda x: np.ascontiguousarray(to_numpy(x), dtype=np.int32))
    out, lse, mx = C.cpu_forward(merged.variant(), q, k, v, scalars={n: float(x) for n, x in scalars.items()},
                                 buffers=host_buffers, block_mask=mask, scale=float(scale))
    qdt = dtype_name(query.dtype)
    stat = np.float64 if qdt == "float64" else np.float32
    out = out.astype(np.float32 if qdt == "bfloat16" else qdt)
    return out, lse.astype(stat) if need_lse else None, mx.astype(stat) if need_max else None


def _host_buffer(a):
    """A captured host array in a dtype the IR reads (float64 -> float32, small ints -> int32)."""
    import numpy as np

    if a.dtype == np.float64:
        return np.ascontiguousarray(a, dtype=np.float32)
    if a.dtype in (np.int8, np.uint8, np.int16, np.uint16):
        return np.ascontiguousarray(a, dtype=np.int32)
    return np.ascontiguousarray(a)


def build_block_mask_numpy(mask_mod, B, H, q_len, kv_len, q_block, kv_block):
    """The 8 int32 arrays of torch's BlockMask layout for a traced mask_mod, built natively on the CPU
    (tile by tile, never the dense mask): kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices,
    q_num_blocks, q_indices, full_q_num_blocks, full_q_indices."""
    from ._arrays import to_numpy

    C = require("the native block-mask builder")
    merged = Merged(None, mask_mod)
    scalars, buffers = merged.values(None, mask_mod)
    mod = None if merged.mask is None else parsed_mod(*merged.mask)
    return C.build_block_mask(mod, B, H, q_len, kv_len, q_block, kv_block,
                              scalars={n: float(x) for n, x in scalars.items()},
                              buffers={n: _host_buffer(to_numpy(b)) for n, b in buffers.items()})
