"""One line to run torch's FlexAttention API on flexattn:

    import flexattn.torch
    flexattn.torch.enable()        # torch.nn.attention.flex_attention.flex_attention / create_block_mask
    ...                            # -> flexattn (autograd, torch.compile, CUDA and CPU tensors)
    flexattn.torch.disable()       # torch's own again
    with flexattn.torch.enabled():  # or for a block of code
        ...

enable() replaces the two functions in torch.nn.attention.flex_attention and in every module already
imported that bound them by name (`from torch.nn.attention.flex_attention import flex_attention`, any
alias); disable() puts back exactly what it replaced. Modules imported later pick up whatever torch's
module holds at that time. BlockMasks made by the replaced create_block_mask are flexattn.BlockMask
objects with torch's fields and layout.
"""
from __future__ import annotations

import contextlib
import importlib
import sys

_TORCH_MODULE = "torch.nn.attention.flex_attention"
_NAMES = ("flex_attention", "create_block_mask")
_state = {"patched": [], "originals": {}}


def _replacements():
    from . import _torch_api

    tfa = importlib.import_module(_TORCH_MODULE)
    originals = _state["originals"] or {name: getattr(tfa, name) for name in _NAMES}
    _state["originals"] = originals
    return tfa, ((originals["flex_attention"], _torch_api.flex_attention),
                  (originals["create_block_mask"], _torch_api.create_block_mask))


def enable():
    """Routes torch's flex_attention and create_block_mask to flexattn (idempotent). Raises ImportError when
    torch or the compiled extension is missing."""
    from . import _native

    if is_enabled():
        return
    importlib.import_module("torch")
    _native.require("flexattn.torch.enable()")
    tfa, repl = _replacements()
    patched = []
    for (original, new), name in zip(repl, _NAMES):
        patched.append((tfa.__dict__, name, original))
        tfa.__dict__[name] = new
    for mod_name, mod in list(sys.modules.items()):
        d = getattr(mod, "__dict__", None)
        if mod is tfa or d is None or mod_name.split(".")[0] == "flexattn":
            continue
        for key, value in list(d.items()):
            for original, new in repl:
                if value is original:  # identity only: never call a foreign __eq__ / __hash__
                    patched.append((d, key, value))
                    d[key] = new
    _state["patched"] = patched


def disable():
    """Restores torch's functions everywhere enable() replaced them (no-op when not enabled)."""
    for d, key, original in reversed(_state["patched"]):
        d[key] = original
    _state["patched"] = []


def is_enabled() -> bool:
    return bool(_state["patched"])


@contextlib.contextmanager
def enabled():
    """enable() for the duration of a with-block; restores the previous state on exit."""
    was = is_enabled()
    enable()
    try:
        yield
    finally:
        if not was:
            disable()


__all__ = ["disable", "enable", "enabled", "is_enabled"]
