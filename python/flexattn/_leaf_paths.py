"""Where each captured value of a mod lives, as a path of plain accesses from the mod, so that code
traced by torch.compile can re-read the values (a graph input for a tensor) without running the tracer.

paths(fn) visits exactly what _capture.walk visits, in the same order, and returns one (path, value)
per leaf; a path is a tuple of steps:
  ("cell", i)  fn.__closure__[i].cell_contents      ("global", name)  fn.__globals__[name]
  ("default", i)  fn.__defaults__[i]                 ("kwdefault", name)  fn.__kwdefaults__[name]
  ("func",) / ("arg", i) / ("kw", name)  of a functools.partial
  ("method",)  a bound method's __func__            ("item", key)  container[key]
  ("self",)  a bound method's __self__                ("attr", name)  getattr(obj, name) (a tensor found there)
fetch(root, path) follows one.
"""
from __future__ import annotations

import enum
import functools
import sys
import types

import numpy as np

from . import _capture


class _Paths:
    def __init__(self):
        self.leaves = []  # (path, value)
        self.objects = []  # (path, object) of the objects the walk does not look into (self of a method, a config)
        self._seen = set()

    def visit(self, obj, path, depth=0):
        if isinstance(obj, enum.Enum) or isinstance(obj, _capture._CONSTANTS) or isinstance(obj, np.bool_):
            return  # (an enum member is a constant of the key, as in _capture.Walker.visit)
        if isinstance(obj, (int, float)) or (isinstance(obj, np.generic) and obj.dtype.kind in "iuf"):
            self.leaves.append((path, obj))
            return
        if isinstance(obj, np.ndarray) or _capture.is_torch_tensor(obj):
            self.leaves.append((path, obj))
            return
        if depth >= _capture._MAX_DEPTH:
            return
        if isinstance(obj, types.FunctionType):
            self._function(obj, path, depth)
        elif isinstance(obj, functools.partial):
            self.visit(obj.func, path + (("func",),), depth + 1)
            for i, a in enumerate(obj.args):
                self.visit(a, path + (("arg", i),), depth + 1)
            for k, v in obj.keywords.items():
                self.visit(v, path + (("kw", k),), depth + 1)
        elif isinstance(obj, types.MethodType):
            self.objects.append((path + (("self",),), obj.__self__))
            self.visit(obj.__func__, path + (("method",),), depth + 1)
        elif type(obj) in (tuple, list) and len(obj) <= _capture._MAX_CONTAINER:
            for i, x in enumerate(obj):
                self.visit(x, path + (("item", i),), depth + 1)
        elif type(obj) is dict and len(obj) <= _capture._MAX_CONTAINER and all(isinstance(k, str) for k in obj):
            for k, v in obj.items():
                self.visit(v, path + (("item", k),), depth + 1)
        elif _capture._has(obj, "__dlpack__") and _capture._has(obj, "shape") and not isinstance(obj, type):
            self.leaves.append((path, obj))
        elif not isinstance(obj, types.ModuleType):
            self.objects.append((path, obj))

    def _function(self, fn, path, depth):
        if id(fn) in self._seen:
            return
        self._seen.add(id(fn))
        code = fn.__code__
        for i, (_, cell) in enumerate(zip(code.co_freevars, fn.__closure__ or ())):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            self.visit(value, path + (("cell", i),), depth + 1)
        if _capture._is_library(fn):
            return
        for name in sorted(_capture._code_names(code, set())):
            if name in fn.__globals__:
                self.visit(fn.__globals__[name], path + (("global", name),), depth + 1)
        for i, v in enumerate(fn.__defaults__ or ()):
            self.visit(v, path + (("default", i),), depth + 1)
        for k, v in (fn.__kwdefaults__ or {}).items():
            self.visit(v, path + (("kwdefault", k),), depth + 1)


def paths(fn):
    """[(path, value)] for the leaves of _capture.walk(fn), in its order."""
    p = _Paths()
    p.visit(fn, ())
    return p.leaves


def fetch(root, path):
    """The value at `path` from `root` (plain attribute and item accesses only: torch.compile traces it)."""
    obj = root
    for step in path:
        kind = step[0]
        if kind == "cell":
            obj = obj.__closure__[step[1]].cell_contents
        elif kind == "global":
            obj = obj.__globals__[step[1]]
        elif kind == "default":
            obj = obj.__defaults__[step[1]]
        elif kind == "kwdefault":
            obj = obj.__kwdefaults__[step[1]]
        elif kind == "func":
            obj = obj.func
        elif kind == "arg":
            obj = obj.args[step[1]]
        elif kind == "kw":
            obj = obj.keywords[step[1]]
        elif kind == "method":
            obj = obj.__func__
        elif kind == "self":
            obj = obj.__self__
        elif kind == "attr":
            obj = getattr(obj, step[1])
        else:
            obj = obj[step[1]]
    return obj


def _converted(x):
    """The walk holds DLPack producers (other than numpy / torch) as numpy views, not as themselves."""
    return hasattr(x, "__dlpack__") and not isinstance(x, np.ndarray) and not _capture.is_torch_tensor(x)


def locate(fn, traced):
    """{name: path} for the scalars and buffers of a TracedMod of `fn`, matched to _capture.walk's leaves
    by position (the same walk) and checked by identity. A name without a path (a tensor the mod reached
    through an object attribute) is missing from the result."""
    _, leaves, _, _ = _capture.walk(fn)
    mine = paths(fn)
    if len(mine) != len(leaves) or any(m[1] is not w.origin and not _converted(m[1]) for m, w in zip(mine, leaves)):
        raise RuntimeError(f"flexattn: internal error: the captured values of {getattr(fn, '__qualname__', fn)!r} "
                           "could not be located for torch.compile")
    by_source = {}
    for (path, _), leaf in zip(mine, leaves):
        by_source.setdefault(leaf.source, path)
    out = {}
    for name, source in traced.sources.items():
        if source in by_source:
            out[name] = by_source[source]
    missing = {name: o for name, o in traced.extra_origins.items() if name not in out}
    if missing:
        p = _Paths()
        p.visit(fn, ())
        for name, origin in missing.items():
            found = _attribute_path(p.objects, origin)
            if found is not None:
                out[name] = found
    return out


_GUARDED = (int, float, bool, str, type(None))


def attribute_numbers(fn, limit=256):
    """[(path, value)] of the number / bool / str / None attributes (instance and class attributes, and items of
    attribute containers: self.cfg["slope"]) of the objects a mod reaches, four levels deep. A trace reads such values
    as constants (a number in the IR, a bool or str in a branch); under torch.compile the graph compares each with its
    value at planning time, which makes Dynamo guard on it, so a changed value recompiles instead of running stale."""
    p = _Paths()
    p.visit(fn, ())
    out = []
    for path, name, value in _attribute_walk(p.objects, max_depth=4):
        if len(out) >= limit:
            break
        out.extend(_guardable(path + (("attr", name),), value, 3))
    return out[:limit]


def _guardable(path, value, depth):
    """(path, value) of the simple values at or inside `value` (items of exact dicts / lists / tuples, `depth` levels)."""
    if type(value) in _GUARDED:  # (not numpy scalars: Dynamo makes them tensors, and a guard a data-dependent branch)
        if value == value:  # (nan never equals itself: no guard could hold)
            yield path, value
    elif depth > 0 and type(value) in (dict, list, tuple) and len(value) <= _capture._MAX_CONTAINER:
        for k, x in (value.items() if type(value) is dict else enumerate(value)):
            if type(k) in (int, str):
                yield from _guardable(path + (("item", k),), x, depth - 1)


def _attributes(obj):
    """(name, value) of an object's attributes as getattr reads them: an nn.Module's parameters, buffers and
    submodules (kept outside its __dict__), then its __dict__."""
    own = getattr(obj, "__dict__", {})
    for table in ("_parameters", "_buffers", "_modules"):
        d = own.get(table)
        if type(d) is dict:
            yield from d.items()
    yield from own.items()
    if isinstance(obj, enum.Enum):  # a member's class attributes are the enum machinery's
        return
    for c in type(obj).__mro__:  # class attributes a user class adds (self.SCALE): what getattr finds there
        if _capture._is_library(c) or c is object:
            continue
        for name, value in list(vars(c).items()):
            if not name.startswith("__") and name not in own and type(value) in _GUARDED:
                yield name, value


def _attribute_walk(objects, max_depth=3, max_nodes=512):
    """(path of the object, attribute name, value) for the attributes of the walk's objects and of their objects,
    breadth first (self.temp, then self.block.bias)."""
    queue = [(path, obj, 0) for path, obj in objects]
    seen = set()
    while queue and len(seen) < max_nodes:
        path, obj, depth = queue.pop(0)
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        module = isinstance(obj, _capture.torch_nn_module())
        for name, value in _attributes(obj):
            # (an nn.ModuleList's submodules are named "0", "1", ...: getattr reads them there)
            if not isinstance(name, str) or not (name.isidentifier() or (module and name.isdigit())):
                continue
            yield path, name, value
            if depth + 1 < max_depth and hasattr(value, "__dict__") and not isinstance(
                    value, (types.ModuleType, types.FunctionType, type, enum.Enum)) and not _capture.is_torch_tensor(
                    value) and not _standard_library_object(value):
                queue.append((path + (("attr", name),), value, depth + 1))


def _standard_library_object(value) -> bool:
    """An instance of a class of Python's own library (a logging.Logger, a threading.Lock): no mod reads into it, and
    Dynamo cannot always compare its attributes (a guard on logger.name failed fullgraph)."""
    module = (getattr(type(value), "__module__", None) or "").split(".")[0]
    return module in _STDLIB


_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ("logging", "threading", "collections", "enum", "abc")))


def _attribute_path(objects, target):
    """The path to `target` through attributes of the walk's objects (self.temp, self.block.bias)."""
    return next((path + (("attr", name),) for path, name, value in _attribute_walk(objects) if value is target), None)
