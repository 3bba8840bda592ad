"""What a trace may have read through objects, summarised so a cached trace can be checked against it.

A mod that reaches a user object (an nn.Module's `self`, a config) or a user module reads their attributes while it
is traced: `self.window` becomes a constant of the IR, `self.act` picks the operations, `self.bias.shape[0]` a size.
None of that is in the walk's key (_capture.walk), so such traces were not cached: ~0.3 ms of host time on every call
(measured: a bound-method softcap 276 us per trace() against 24 us for the same closure).

fingerprint() lists those inputs as they are now, by content: the attributes of the objects (an nn.Module's
parameters, buffers and submodules included) three levels deep, the attributes of their user classes, and what those
classes' methods name (globals, closure cells, defaults), with tensors by dtype / shape / device (their values are
read at run time; a trace that reads one's value in Python is not cached, _dispatch). A cached trace whose
fingerprint equals today's read the same constants; anything else traces again.

The summary is an allowlist: whatever it cannot describe completely (an object without a plain __dict__, a class
with __getattr__ or __slots__, a subclass of a builtin container or number, a numpy array, an object past the depth,
a graph of more than _MAX_NODES objects, a non-weak-referenceable object the entry would hold) makes it None, and
such mods are traced on every call as before. Identity is used only for functions and classes, which the cache entry
holds weakly (anchors): a dead one makes the entry stale, so its id cannot have been reused.
"""
from __future__ import annotations

import enum
import functools
import sys
import types
import weakref

import numpy as np

from . import _capture
from ._arrays import torch_module

_MAX_DEPTH = 3  # self.block.cfg.x: attributes of attributes of the walk's objects
# objects, classes and functions looked into; past it the summary is not taken (measured ~12 us a node with its
# attributes: a 16-node summary costs about half of the trace it saves, ~0.2 ms)
_MAX_NODES = 16
_MAX_INCOMPLETE = 1024
_EXACT = (bool, int, str, bytes, type(None), complex)
# an nn.Module's hook tables and bookkeeping: what a mod computes never reads them
_MODULE_INTERNALS = frozenset((
    "_non_persistent_buffers_set", "_backward_pre_hooks", "_backward_hooks", "_is_full_backward_hook",
    "_forward_hooks", "_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs", "_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks"))
_MODULE_TABLES = ("_parameters", "_buffers", "_modules")
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ("enum", "abc", "dataclasses", "collections", "typing",
                                                          "types", "functools", "operator", "math")))
_incomplete_keys = {}  # walk keys whose summary could not be taken: not tried again (bounded)


class _Incomplete(Exception):
    pass


class Summary:
    __slots__ = ("key", "anchors", "tensor_counts")

    def __init__(self, key, anchors, tensor_counts):
        self.key, self.anchors, self.tensor_counts = key, anchors, tensor_counts


def fingerprint(walk_key, refs):
    """The Summary of what a trace of a walk with this key may have read through its objects (`refs`: user objects,
    bound methods' selves, user modules and classes), or None when it cannot be taken completely."""
    if walk_key in _incomplete_keys:
        return None
    f = _Fingerprint()
    try:
        for obj in refs:
            f.anchor(obj)
            if isinstance(obj, types.ModuleType):
                f.module(obj)
            elif isinstance(obj, type):
                f.cls(obj)
            else:
                f.object(obj, 0)
        key = tuple(f.out)
        hash(key)
    except (_Incomplete, RecursionError, Exception):  # noqa: BLE001 - anything unforeseen: not cached
        if len(_incomplete_keys) >= _MAX_INCOMPLETE:
            _incomplete_keys.clear()
        _incomplete_keys[walk_key] = True
        return None
    return Summary(key, f.anchors, f.tensor_counts)


def _library(obj) -> bool:
    return _library_name(getattr(obj, "__module__", None) or "")


def _library_name(module_name: str) -> bool:
    """flexattn's library roots, and Python's own modules (enum, dataclasses, collections, ...): their classes and
    functions are taken as unchanging."""
    return _capture._is_library_name(module_name) or module_name.split(".")[0] in _STDLIB


def _nn_module_class():
    torch = torch_module()
    return torch.nn.Module if torch is not None else None


class _Fingerprint:
    def __init__(self):
        self.out, self.anchors, self.tensor_counts = [], [], {}
        self.order = {}  # id -> visit index of objects, classes, functions and modules looked into
        self.held = []  # what `order` names, kept alive for the walk (no id reused meanwhile)

    def anchor(self, obj):
        """obj is named by identity: the entry must hold it weakly; one that takes no weak reference is held only
        if it cannot hold user objects (a builtin function of a module)."""
        try:
            weakref.ref(obj)
        except TypeError:
            if not (isinstance(obj, types.BuiltinFunctionType)
                    and (obj.__self__ is None or isinstance(obj.__self__, (types.ModuleType, type)))):
                raise _Incomplete from None
        self.anchors.append(obj)
        return id(obj)

    def _first(self, obj) -> bool:
        """True the first time obj is looked into; later visits record where it was first seen."""
        i = self.order.get(id(obj))
        if i is not None:
            self.out.append(("seen", i))
            return False
        if len(self.order) >= _MAX_NODES:
            raise _Incomplete
        self.order[id(obj)] = len(self.order)
        self.held.append(obj)
        return True

    # ---- containers of names ----
    def module(self, mod):
        self.out.append(("module", mod.__name__))
        if not self._first(mod):
            return
        for name, value in list(vars(mod).items()):
            if not name.startswith("__"):
                self.value(name, value, 1)
        self.out.append(("end",))

    def cls(self, cls):
        """A class by identity; a user class also by its attributes (class constants read as self.x, methods and the
        globals / cells / defaults they read). A class whose attribute lookup is its own (__getattr__,
        __getattribute__, __slots__) cannot be summarised."""
        self.out.append(("class", self.anchor(cls)))
        if not self._first(cls):
            return
        module = _nn_module_class()
        for c in cls.__mro__:
            if c is object or (module is not None and c is module):
                continue
            own = vars(c)
            if "__getattr__" in own or "__getattribute__" in own or own.get("__slots__"):
                raise _Incomplete
            if _library(c):
                continue
            self.out.append(("attributes of", self.anchor(c)))
            for name, value in list(own.items()):
                if name.startswith("__") and name.endswith("__"):
                    continue
                if isinstance(value, (staticmethod, classmethod)):
                    value = value.__func__
                elif isinstance(value, property):
                    value = (value.fget, value.fset, value.fdel)
                elif isinstance(value, functools.cached_property):
                    value = value.func
                self.value(name, value, 1)
        self.out.append(("end",))

    def object(self, obj, depth):
        if depth > _MAX_DEPTH:
            raise _Incomplete
        cls = type(obj)
        self.cls(cls)
        if not self._first(obj):
            return
        table = getattr(obj, "__dict__", None)
        if type(table) is not dict:
            raise _Incomplete
        self.out.append(("object",))
        for name, value in list(table.items()):
            if name in _MODULE_INTERNALS:
                continue
            if name in _MODULE_TABLES and type(value) is dict:
                self.out.append((name,))
                for n, x in list(value.items()):
                    self.value(n, x, depth)
                self.out.append(("end",))
            else:
                self.value(name, value, depth)
        self.out.append(("end",))

    def function(self, name, fn, depth):
        self.out.append((name, "function", self.anchor(fn)))
        if not self._first(fn):
            return
        for i, cell in enumerate(fn.__closure__ or ()):
            try:
                self.value(i, cell.cell_contents, depth)
            except ValueError:
                self.out.append((i, "empty cell"))
        self.value("defaults", fn.__defaults__, depth)
        self.value("kwdefaults", fn.__kwdefaults__, depth)
        if not _library(fn):
            g = fn.__globals__
            for n in sorted(_capture._code_names(fn.__code__, set())):
                if n in g:
                    self.value(n, g[n], depth)
        self.out.append(("end",))

    # ---- one value ----
    def value(self, name, v, depth):
        t = type(v)
        if t in _EXACT:
            self.out.append((name, t, v))
        elif t is float:
            self.out.append((name, float, v.hex()))  # hex: -0.0 and 0.0 differ, nan equals itself
        elif isinstance(v, np.generic) and v.dtype.kind in "biufc":
            self.out.append((name, "numpy", str(v.dtype), v.tobytes()))
        elif t in (tuple, list) or (isinstance(v, tuple) and hasattr(t, "_fields")):
            if len(v) > _capture._MAX_CONTAINER:
                raise _Incomplete
            if t not in (tuple, list):  # a namedtuple: its class (by identity only), then its fields
                self.out.append((name, "namedtuple", self.anchor(t)))
            self.out.append((name, "sequence", len(v)))
            for i, x in enumerate(v):
                self.value(i, x, depth)
            self.out.append(("end",))
        elif t is dict:
            if len(v) > _capture._MAX_CONTAINER or any(type(k) not in (str, int) for k in v):
                raise _Incomplete
            self.out.append((name, "dict", len(v)))
            for k, x in list(v.items()):
                self.value((type(k), k), x, depth)
            self.out.append(("end",))
        elif _capture.is_torch_tensor(v):
            self.tensor_counts[id(v)] = self.tensor_counts.get(id(v), 0) + 1
            self.held.append(v)
            self.out.append((name, "tensor", type(v), str(v.dtype), tuple(v.shape), str(v.device),
                             bool(v.requires_grad)))
        elif isinstance(v, types.ModuleType):
            if _library_name(v.__name__):
                self.out.append((name, "module", v.__name__))
            else:
                self.module(v)
        elif t is types.FunctionType:
            self.function(name, v, depth)
        elif t is types.MethodType:
            self.out.append((name, "method"))
            self.value("func", v.__func__, depth)
            self.value("self", v.__self__, depth)
        elif t is functools.partial:
            self.out.append((name, "partial"))
            self.value("func", v.func, depth)
            self.value("args", v.args, depth)
            self.value("keywords", v.keywords, depth)
        elif isinstance(v, type):
            self.out.append((name,))
            self.cls(v)
        elif isinstance(v, enum.Enum):
            self.out.append((name, "enum", self.anchor(t), v.name))
        elif isinstance(v, (types.BuiltinFunctionType, np.ufunc)) or _is_torch_constant(v):
            self.out.append((name, "constant", self.anchor(v) if not _is_torch_constant(v) else str(v), type(v)))
        elif t in (set, frozenset):
            if len(v) > _capture._MAX_CONTAINER or any(type(x) not in _EXACT for x in v):
                raise _Incomplete
            self.out.append((name, "set", frozenset((type(x), x) for x in v)))
        elif isinstance(v, np.ndarray) or isinstance(v, (dict, list, tuple, set, int, float, str, bytes)):
            raise _Incomplete  # numpy arrays (their values are read as constants), subclasses of builtins
        else:
            self.out.append((name,))
            self.object(v, depth + 1)


def _is_torch_constant(v) -> bool:
    torch = torch_module()
    return torch is not None and isinstance(v, (torch.dtype, torch.device, torch.finfo, torch.iinfo))
