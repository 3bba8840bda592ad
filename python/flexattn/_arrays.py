"""Array interop without importing torch: numpy arrays, torch tensors (only if torch is already imported
by the user) and any DLPack producer."""
from __future__ import annotations

import sys

import numpy as np

# Canonical dtype names -> (buffer dtype of the IR after conversion, value type of a 0-d scalar).
# f64 buffers are stored as f32 and small integers as i32: the IR has no such element types.
_DTYPES = {
    "bool": ("bool", "bool"), "int8": ("i32", "i32"), "uint8": ("i32", "i32"), "int16": ("i32", "i32"),
    "int32": ("i32", "i32"), "int64": ("i64", "i64"), "float16": ("f16", "f32"), "bfloat16": ("bf16", "f32"),
    "float32": ("f32", "f32"), "float64": ("f32", "f32"),
}
_ALIASES = {"half": "float16", "float": "float32", "double": "float64", "int": "int32", "long": "int64",
            "short": "int16", "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
            "i32": "int32", "i64": "int64", "bool_": "bool"}
# IR value type a cast to each canonical dtype produces.
CAST_TYPE = {"bool": "bool", "int32": "i32", "int64": "i64", "float32": "f32", "float64": "f32"}


def torch_module():
    """torch if the user imported it, else None. flexattn never imports torch on its own."""
    return sys.modules.get("torch")


def is_torch_tensor(x) -> bool:
    torch = torch_module()
    return torch is not None and isinstance(x, torch.Tensor)


def dtype_name(dtype) -> str:
    """'float32', 'bfloat16', ... for a numpy dtype, torch dtype, Python type or string."""
    if dtype is bool:
        return "bool"
    if dtype is int:
        return "int64"
    if dtype is float:
        return "float32"
    s = str(dtype)
    if s.startswith("torch."):
        s = s[6:]
    else:
        try:
            s = np.dtype(dtype).name
        except TypeError:
            pass
    return _ALIASES.get(s, s)


def buffer_dtype(dtype) -> str:
    name = dtype_name(dtype)
    if name not in _DTYPES:
        raise TypeError(f"captured tensors of dtype {name} are not supported (expected one of "
                        f"{', '.join(sorted(_DTYPES))})")
    return _DTYPES[name][0]


def scalar_type(dtype) -> str:
    name = dtype_name(dtype)
    if name not in _DTYPES:
        raise TypeError(f"captured 0-d tensors of dtype {name} are not supported")
    return _DTYPES[name][1]


def is_array_like(x) -> bool:
    return isinstance(x, np.ndarray) or is_torch_tensor(x) or hasattr(x, "__dlpack__")


def to_numpy(x) -> np.ndarray:
    """A host numpy view/copy of a numpy array, torch tensor (any device; bf16 -> float32) or DLPack
    producer."""
    if isinstance(x, np.ndarray):
        return x
    if is_torch_tensor(x):
        t = x.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        if dtype_name(t.dtype) == "bfloat16":
            t = t.float()
        return t.resolve_conj().resolve_neg().numpy()
    if hasattr(x, "__dlpack__"):
        return np.from_dlpack(x)
    return np.asarray(x)


def buffer_to_numpy(x) -> np.ndarray:
    """A captured buffer as the contiguous numpy array the IR expects (f64 -> f32, int8/16 -> i32)."""
    a = to_numpy(x)
    name = dtype_name(a.dtype)
    if name == "float64":
        a = a.astype(np.float32)
    elif name in ("int8", "uint8", "int16"):
        a = a.astype(np.int32)
    return np.ascontiguousarray(a)


def shape_of(x) -> tuple:
    return tuple(int(s) for s in x.shape)


def device_of(x) -> str:
    """'cpu' for numpy / DLPack host arrays, the torch device string for tensors."""
    return str(x.device) if is_torch_tensor(x) else "cpu"


def like(a: np.ndarray, template, dtype=None):
    """`a` converted to the kind of `template`: a torch tensor on template's device, or numpy."""
    if is_torch_tensor(template):
        torch = torch_module()
        a = np.ascontiguousarray(a)
        t = torch.from_numpy(a if a.flags.writeable else a.copy())
        if dtype is not None:
            t = t.to(dtype)
        return t.to(template.device)
    return a if dtype is None else a.astype(dtype)


def round_to_dtype(x: np.ndarray, name: str) -> np.ndarray:
    """x (float64) rounded to the precision of dtype `name`, returned as float64 (round to nearest even)."""
    if name == "float16":
        return x.astype(np.float16).astype(np.float64)
    if name == "float32":
        return x.astype(np.float32).astype(np.float64)
    if name == "bfloat16":
        f = np.ascontiguousarray(x, dtype=np.float32)
        u = f.view(np.uint32).astype(np.uint64)
        rounded = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
        nan = np.isnan(f)
        out = rounded.astype(np.uint32).view(np.float32).astype(np.float64)
        return np.where(nan, np.nan, out)
    return np.asarray(x, dtype=np.float64)


def numpy_dtype(name: str):
    """The numpy dtype used to hold results of dtype `name` (bfloat16 has none: float32)."""
    return np.float32 if name == "bfloat16" else np.dtype(name)


def resolve_device(device):
    """Where create_block_mask / create_mask put their tensors: 'numpy', or a torch device.
    None: torch's default (an accelerator if there is one, else cpu) when the user imported torch, else
    numpy. 'cpu' without torch imported: numpy. Any other device needs torch."""
    torch = torch_module()
    if device is None:
        if torch is None:
            return "numpy"
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if isinstance(device, str) and device in ("numpy", "np"):
        return "numpy"
    if torch is None:
        if str(device) == "cpu":
            return "numpy"
        try:
            import torch  # noqa: F401  (the caller asked for a torch device)
        except ImportError:
            raise ValueError(f"device={device!r} needs torch, which is not installed; use device=None or 'cpu' "
                             "for numpy arrays") from None
        torch = torch_module()
    return torch.device(device)


def from_numpy(a: np.ndarray, device):
    """`a` on `device` as resolve_device() returned it."""
    if isinstance(device, str) and device == "numpy":
        return a
    torch = torch_module()
    a = np.ascontiguousarray(a)
    return torch.from_numpy(a if a.flags.writeable else a.copy()).to(device)
