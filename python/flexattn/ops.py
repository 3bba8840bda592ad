"""Operations a mod may use when it is written without torch.

Each function works on traced values (inside flex_attention / create_block_mask / trace), on torch
tensors (it calls the torch function of the same name) and on numpy arrays or Python numbers (it
computes with numpy), so a mod written with flexattn.ops can also be called directly.
"""
from __future__ import annotations

import math

import numpy as np

from ._arrays import dtype_name, is_torch_tensor, torch_module
from ._dispatch import call_handler
from ._proxy import BufferProxy, Proxy


def _traced(args) -> bool:
    from ._rows import RowProxy

    return any(isinstance(a, (Proxy, BufferProxy, RowProxy)) for a in args)


def _np_clamp(x, min=None, max=None):
    if min is not None:
        x = np.maximum(x, min)
    return x if max is None else np.minimum(x, max)


def _np_cast(x, dtype):
    return np.asarray(x).astype(np.float32 if dtype_name(dtype) == "bfloat16" else dtype_name(dtype))


_NUMPY = {
    "where": np.where, "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "tanh": np.tanh, "tanh_approx": np.tanh, "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-np.asarray(x))),
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "erf": np.vectorize(math.erf, otypes=[np.float64]),
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "abs": np.abs,
    "minimum": np.minimum, "maximum": np.maximum, "clamp": _np_clamp, "pow": np.power,
    "floor_divide": np.floor_divide, "remainder": np.remainder, "logical_and": np.logical_and,
    "logical_or": np.logical_or, "logical_xor": np.logical_xor, "logical_not": np.logical_not,
    "isnan": np.isnan, "isinf": np.isinf, "isneginf": np.isneginf, "isposinf": np.isposinf,
    "isfinite": np.isfinite, "sign": np.sign, "to": _np_cast,
    # integers (bitwise; traced, shifts follow ATen: a count outside [0, bits) gives 0 / the sign)
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
    "bitwise_not": np.invert, "bitwise_left_shift": np.left_shift, "bitwise_right_shift": np.right_shift,
}
# Called eagerly on torch tensors: torch has no approximate tanh of its own.
_TORCH_NAME = {"tanh_approx": "tanh"}


def _make(name):
    def op(*args, **kwargs):
        if _traced(args) or _traced(kwargs.values()):
            return call_handler(name, args, kwargs)
        if any(is_torch_tensor(a) for a in args):
            if name == "to":
                return args[0].to(getattr(torch_module(), dtype_name(args[1])))
            return getattr(torch_module(), _TORCH_NAME.get(name, name))(*args, **kwargs)
        return _NUMPY[name](*args, **kwargs)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"{name} on traced values, torch tensors or numpy arrays (torch semantics when traced)."
    return op


where = _make("where")
exp, exp2, log, log2 = _make("exp"), _make("exp2"), _make("log"), _make("log2")
sqrt, rsqrt, tanh, sigmoid = _make("sqrt"), _make("rsqrt"), _make("tanh"), _make("sigmoid")
# tanh on the GPU's tanh.approx.f32 (relative error ~2^-11, about 5e-4) where the kernels evaluate the mod; exact
# tanh on the CPU reference, numpy and torch tensors. For softcap (cap * tanh_approx(score / cap)): on Hopper the
# forward then spends two MUFU ops per entry instead of three. As attention-gym's softcap with approx=True.
tanh_approx = _make("tanh_approx")
tanh_approx.__doc__ = ("tanh on traced values evaluated with the GPU's tanh.approx.f32 (relative error ~2^-11); exact "
                       "tanh on torch tensors, numpy arrays and numbers.")
sin, cos, floor, ceil, trunc, abs = _make("sin"), _make("cos"), _make("floor"), _make("ceil"), _make("trunc"), _make("abs")
tan, erf = _make("tan"), _make("erf")
minimum, maximum, clamp, pow = _make("minimum"), _make("maximum"), _make("clamp"), _make("pow")
floor_divide, remainder = _make("floor_divide"), _make("remainder")
logical_and, logical_or, logical_xor, logical_not = (_make("logical_and"), _make("logical_or"),
                                                      _make("logical_xor"), _make("logical_not"))
isnan, isinf, isneginf, isposinf, isfinite = (_make("isnan"), _make("isinf"), _make("isneginf"), _make("isposinf"),
                                              _make("isfinite"))
sign = _make("sign")
bitwise_and, bitwise_or, bitwise_xor, bitwise_not = (_make("bitwise_and"), _make("bitwise_or"), _make("bitwise_xor"),
                                                     _make("bitwise_not"))
bitwise_left_shift, bitwise_right_shift = _make("bitwise_left_shift"), _make("bitwise_right_shift")
cast = _make("to")  # cast(x, "float32" | "int32" | "int64" | "bool" | numpy/torch dtype)

__all__ = sorted(n for n in _NUMPY if n != "to") + ["cast"]
