"""What a trace may have read through objects, summarised so a cached trace can be checked against it.

A mod that reaches a user object (an nn.Module's `self`, a config) or a user module reads their attributes while it
is traced: `self.window` becomes a constant of the IR, `self.act` picks the operations, `self.bias.shape[0]` a size.
None of that is in the walk's key (_capture.walk), so session 37 stopped caching such traces: ~0.3 ms of host time on
every call (measured: a bound-method softcap 276 us per trace() against 24 us for the same closure). The fingerprint
lists those inputs as they are now: the simple values (numbers, strings, small tuples of them), the dtypes and shapes
of tensors and the identities of functions, reached through the objects' attributes (an nn.Module's parameters,
buffers and submodules included), through their classes' attributes, and through the globals that their methods name.
A cached trace whose fingerprint equals today's read the same constants; a changed `self.window` misses and traces
again, as before. None where the summary would not be complete (an object graph past the limits below): such mods
keep being traced every call.
"""
from __future__ import annotations

import functools
import types

import numpy as np

from . import _capture

_MAX_DEPTH = 3  # self.block.cfg.x: attributes of attributes of the walk's objects
_MAX_NODES = 256  # objects looked into; past it the summary is not taken (None)
_SIMPLE = (bool, int, float, complex, str, bytes, type(None))
_MODULE_TABLES = ("_parameters", "_buffers", "_modules")
# an nn.Module's hook tables and bookkeeping: what a mod computes never reads them
_MODULE_INTERNALS = frozenset((
    "_non_persistent_buffers_set", "_backward_pre_hooks", "_backward_hooks", "_is_full_backward_hook",
    "_forward_hooks", "_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs", "_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks"))


class _Incomplete(Exception):
    pass


def fingerprint(refs):
    """(summary, anchors): a hashable summary of what the trace of a walk may have read through its objects (`refs`:
    user objects, bound methods' selves, user modules), and the objects it names by identity (the cache entry must hold them, weakly); None when it
    cannot be taken."""
    f = _Fingerprint()
    try:
        for obj in refs:
            if isinstance(obj, types.ModuleType):
                f.module(obj)
            else:
                f.object(obj, 0)
    except (_Incomplete, RecursionError):
        return None
    return tuple(f.out), f.anchors


class _Fingerprint:
    def __init__(self):
        self.out, self.seen, self.classes, self.anchors = [], set(), set(), []

    def _count(self, obj):
        if id(obj) in self.seen:
            self.out.append(("seen", id(obj)))
            return False
        if len(self.seen) >= _MAX_NODES:
            raise _Incomplete
        self.seen.add(id(obj))
        return True

    def module(self, mod):
        if mod is None or not self._count(mod):
            return
        self.out.append(("module", mod.__name__))
        for name, value in list(vars(mod).items()):
            if not name.startswith("__"):
                self.value(name, value, 1)  # as the attributes of an object

    def object(self, obj, depth):
        if not self._count(obj):
            return
        cls = type(obj)
        self.out.append(("object", self.ident(cls)))
        self.cls(cls)
        table = getattr(obj, "__dict__", None)
        if type(table) is not dict:
            slots = [s for c in cls.__mro__ for s in getattr(c, "__slots__", ())]
            if slots:  # a __slots__ object: its slot values are attributes a mod can read
                for name in slots:
                    self.value(name, getattr(obj, name, None), depth + 1)
            return
        for name, value in list(table.items()):
            if name in _MODULE_TABLES and type(value) is dict:  # an nn.Module's parameters, buffers, submodules
                for n, x in list(value.items()):
                    self.value(n, x, depth + 1)
            elif name not in _MODULE_INTERNALS:
                self.value(name, value, depth + 1)

    def cls(self, cls):
        """A user class's own attributes (class constants a method reads as self.x) and what its methods read
        (a module-level constant or a closure variable read by self.helper())."""
        for c in cls.__mro__:
            if id(c) in self.classes or _capture._is_library_name(getattr(c, "__module__", "") or ""):
                continue
            self.classes.add(id(c))
            for name, value in list(vars(c).items()):
                if name.startswith("__"):
                    continue
                fn = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
                if isinstance(fn, property):
                    fn = fn.fget
                if isinstance(fn, types.FunctionType):
                    self.function(name, fn, _MAX_DEPTH)
                elif not callable(value):
                    self.value(name, value, _MAX_DEPTH)

    def function(self, name, fn, depth):
        """The same function object (anchored), what its cells and defaults hold now, and, for a user function,
        the globals its code names (helpers it calls are followed the same way)."""
        self.out.append((name, "fn", self.ident(fn)))
        if not self._count(fn):
            return
        for i, cell in enumerate(fn.__closure__ or ()):
            try:
                self.value(i, cell.cell_contents, depth)
            except ValueError:
                self.out.append((i, "empty"))
        self.value("defaults", fn.__defaults__, depth)
        self.value("kwdefaults", fn.__kwdefaults__, depth)
        if not _capture._is_library(fn):
            g = fn.__globals__
            for n in sorted(_capture._code_names(fn.__code__, set())):
                if n in g and not isinstance(g[n], type):
                    self.value(n, g[n], depth)

    def ident(self, v):
        """v's identity, sound because the entry holds v (weakly: a dead v makes the entry stale, so its id cannot
        have been reused by another object)."""
        self.anchors.append(v)
        return id(v)

    def value(self, name, v, depth):
        t = type(v)
        if t in _SIMPLE or isinstance(v, np.generic):
            self.out.append((name, t, v))
        elif t in (tuple, list) and len(v) <= _capture._MAX_CONTAINER:
            self.out.append((name, t, len(v)))
            for i, x in enumerate(v):
                self.value(i, x, depth)
        elif t is dict and len(v) <= _capture._MAX_CONTAINER:
            self.out.append((name, t, len(v)))
            for k, x in list(v.items()):
                self.value(k if type(k) in _SIMPLE else self.ident(k), x, depth)
        elif isinstance(v, np.ndarray) or _capture.is_torch_tensor(v):
            self.out.append((name, "tensor", str(v.dtype), tuple(v.shape), str(getattr(v, "device", "cpu")),
                             bool(getattr(v, "requires_grad", False))))
        elif isinstance(v, types.ModuleType):
            self.out.append((name, "module", v.__name__))
            if not _capture._is_library_name(v.__name__):
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
        elif isinstance(v, _capture._immutable_types()) or (callable(v) and not hasattr(v, "__dict__")):
            self.out.append((name, "id", self.ident(v)))  # dtypes, devices, classes, enums, builtins
        elif t in (tuple, list, dict, set, frozenset):
            if len(v) > _capture._MAX_CONTAINER or not all(type(x) in _SIMPLE for x in v):
                raise _Incomplete  # a long container (or a set of objects): not summarised
            self.out.append((name, "set", frozenset(v)))
        elif depth < _MAX_DEPTH:
            self.out.append((name, "obj"))
            self.object(v, depth)
        else:  # past the depth looked into (self.a.b.c.x): the same object, its insides not summarised
            self.out.append((name, "id", self.ident(v)))
