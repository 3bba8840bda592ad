"""flexattn: programmable attention with PyTorch FlexAttention's semantics.

A drop-in for torch.nn.attention.flex_attention's API (flex_attention, create_block_mask, create_mask,
BlockMask, and_masks, or_masks, noop_mask, AuxRequest, AuxOutput) that works with or without torch:
torch tensors when torch is used, numpy arrays (or any DLPack producer) otherwise. Mods are traced once
into flexattn's IR (see trace()) and cached by structure; captured Python numbers and 0-d tensors are
runtime scalars (a 0-d tensor that requires grad is a 1-element buffer), captured tensors are buffers.

torch is never imported by flexattn itself; the compiled extension is loaded on first use, or with the package when
torch was imported first.
"""
import sys as _sys

from . import _native, ops
from ._context import TraceError
from ._tracer import TracedMod, clear_cache, mod_kind, trace
from .attention import AuxOutput, AuxRequest, flex_attention
from .block_mask import BlockMask, create_block_mask
from .masks import and_masks, create_mask, noop_mask, or_masks
from .paged import paged_attention

__version__ = "0.1.0"

if "torch" in _sys.modules:
    # Loaded now rather than on the first call, which may be inside torch.compile(fullgraph=True): Dynamo cannot trace
    # the loader's file checks (os.stat), and a failed first compile never ran it, so every later compile failed too.
    try:
        _native.load()
    except ImportError:  # FLEXATTN_REQUIRE_NATIVE=1 without the extension: the first call says so
        pass


def __getattr__(name):
    # flexattn.torch (enable() / disable()) imports torch, so it is not imported with the package; reaching it as an
    # attribute imports it then (`import flexattn; flexattn.torch.enable()` raised AttributeError before).
    if name == "torch":
        import importlib

        return importlib.import_module(".torch", __name__)
    if name == "FlexKernelOptions":
        # torch's TypedDict of kernel_options (a type for annotations; at run time a dict) where torch has it, else
        # dict: `from flexattn import FlexKernelOptions` as from torch's module, without importing torch with flexattn
        try:
            from torch.nn.attention.flex_attention import FlexKernelOptions
        except ImportError:
            FlexKernelOptions = dict
        return FlexKernelOptions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
__all__ = [
    "AuxOutput", "AuxRequest", "BlockMask", "TraceError", "TracedMod", "and_masks", "clear_cache", "create_block_mask",
    "create_mask", "flex_attention", "mod_kind", "noop_mask", "ops", "or_masks", "paged_attention", "trace",
]
