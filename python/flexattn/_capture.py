"""What a mod captures: a walk over its closure cells, referenced globals and default arguments (and,
recursively, over the functions, partials and small containers found there).

The walk yields
  - a structural key: code objects, the types / dtypes / shapes of captured values, constants that steer
    the trace (bools, None, strings) -- but not the values of numbers or tensors;
  - the leaves, in walk order: Python int/float and 0-d tensors (runtime scalars) and tensors/arrays
    (buffers), with a name hint and a description of where they came from;
  - when tracing, a copy of the mod whose leaves are replaced by proxies.
The same mod structure always walks to the same key and the same leaf order, so a cached trace is
bound to a new closure's values by position.
"""
from __future__ import annotations

import enum
import functools
import re
import types

import numpy as np

from . import _ir
from ._arrays import buffer_dtype, dtype_name, is_torch_tensor, scalar_type, torch_module

# Functions from these packages are walked through their closures only (their globals and defaults are
# library constants, not user captures); and_masks / or_masks keep the combined mods in closures.
_LIBRARY_ROOTS = {"torch", "numpy", "flexattn", "functools", "math", "builtins", "typing", "jax"}
_MAX_DEPTH = 8
_MAX_CONTAINER = 64
_CONSTANTS = (bool, type(None), str, bytes, type(Ellipsis), complex)
_REFLECTIVE = frozenset(("globals", "locals", "eval", "exec", "vars"))


class Leaf:
    __slots__ = ("kind", "value", "type", "hint", "source", "name", "alias_of", "origin")

    def __init__(self, kind, value, type_, hint, source):
        self.kind, self.value, self.type, self.hint, self.source = kind, value, type_, hint, source
        self.name, self.alias_of = None, None
        self.origin = value  # the captured object itself (value is a view of it for a learnable 0-d tensor)

    def python_value(self):
        """A scalar leaf's current value as a Python number."""
        v = self.value
        return v if isinstance(v, (int, float)) else v.item()


def _immutable_types():
    types_ = [type, np.dtype, np.ufunc, types.BuiltinFunctionType, frozenset, range, enum.Enum]
    if _torch_loaded():
        import torch

        types_ += [torch.dtype, torch.device, torch.finfo, torch.iinfo]
    return tuple(types_)


_ENUM_OWN = frozenset(vars(enum.Enum)) | {"_generate_next_value_", "_member_names_", "_member_map_",
                                          "_value2member_map_", "_member_type_", "_value_repr_", "_new_member_",
                                          "_use_args_", "_unhashable_values_", "_hashable_values_", "__new__"}


def plain_enum(v) -> bool:
    """An enum member whose class adds no methods or properties, whose member carries nothing extra and whose value is
    a simple one: all a mod can read of it is its identity, name and value, which never change."""
    cls = type(v)
    for c in cls.__mro__:
        if c is enum.Enum or not issubclass(c, enum.Enum):
            break
        if any(not n.startswith("__") and n not in _ENUM_OWN and n not in cls._member_map_ for n in vars(c)):
            return False
    return (set(vars(v)) <= {"_value_", "_name_", "__objclass__", "_sort_order_", "__init__"}
            and type(v._value_) in (bool, int, float, str, type(None)))


def torch_nn_module():
    """torch.nn.Module when torch is loaded, else a class nothing is an instance of."""
    torch = torch_module()
    return torch.nn.Module if torch is not None else _Never


class _Never:
    pass


def _torch_loaded():
    import sys

    return "torch" in sys.modules


def volatile(key, refs) -> bool:
    """Whether a walk reached objects whose attributes the trace may have read as constants: a user object (an
    nn.Module's `self.window`, a config's `cfg.scale`) or a module that is not a library (`cfg.W`). Their values
    are not part of the key, so a cached trace would keep the first call's numbers: such traces are not cached.
    Library classes, enums, dtypes, devices and builtin functions are taken as unchanging; a user class (`K.cap`), a
    method of a mutable object (`get = cfg.get`) and a function with attributes (`helper.k`) are not."""
    if any(k[0] == "module" and k[1].split(".")[0] not in _LIBRARY_ROOTS for k in key
           if type(k) is tuple and len(k) == 2):
        return True
    if not refs:
        return False
    immutable = _immutable_types()
    return any(not _steady(o, immutable) for o in refs)


def _steady(o, immutable) -> bool:
    if isinstance(o, enum.Enum):
        return plain_enum(o)
    if isinstance(o, type):
        return _is_library(o) or (issubclass(o, enum.Enum) and all(plain_enum(m) for m in o))
    if isinstance(o, types.BuiltinFunctionType):
        owner = getattr(o, "__self__", None)
        return owner is None or isinstance(owner, (types.ModuleType, type))
    return isinstance(o, immutable)


def _code_names(code, out):
    out.update(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _code_names(c, out)
    return out


def _is_library(fn) -> bool:
    return _is_library_name(getattr(fn, "__module__", None) or "")


def _is_library_name(module_name: str) -> bool:
    return module_name.split(".")[0] in _LIBRARY_ROOTS


def sanitize(hint: str) -> str:
    name = re.sub(r"\W", "_", hint, flags=re.ASCII) or "value"  # the IR text is ASCII
    if name[0].isdigit():
        name = "v" + name
    if name in _ir.RESERVED or re.fullmatch(r"_t\d+", name):
        name += "_"
    return name


def _has(obj, name) -> bool:
    """hasattr, for objects whose __getattr__ raises something else than AttributeError (a KeyError from a table)."""
    try:
        return hasattr(obj, name)
    except Exception:  # noqa: BLE001 - such an object is not a DLPack producer
        return False


def _learnable(obj) -> bool:
    return is_torch_tensor(obj) and obj.requires_grad and obj.dtype.is_floating_point


class Walker:
    """One walk. With `ctx` (a TraceContext) it also builds the proxied copy and names the leaves."""

    def __init__(self, ctx=None):
        self.ctx = ctx
        self.key, self.leaves, self.refs = [], [], []
        self._memo = {}  # id(function) -> replacement (shared and recursive functions)
        self._buffers = {}  # id(array) -> leaf index (the same array captured twice is one buffer)

    # ---- leaves ----
    def _scalar(self, value, type_, hint, source):
        leaf = Leaf("scalar", value, type_, hint, source)
        self.leaves.append(leaf)
        number = isinstance(value, (int, float, np.generic))  # a Python / numpy number, not a 0-d tensor
        self.key.append(("scalar", type_, number))
        if self.ctx is None:
            return value
        from ._proxy import Proxy

        leaf.name = self.ctx.unique_name(sanitize(hint))
        if number:
            self.ctx.python_numbers.add(leaf.name)
        self.ctx.scalar_values[leaf.name] = leaf.python_value()
        return Proxy(_ir.scalar(leaf.name, type_))

    def _buffer(self, obj, hint, source, identity=None):
        if len(obj.shape) == 0:
            if not _learnable(obj):
                return self._scalar(obj, scalar_type(obj.dtype), hint, source)
            # A runtime scalar has no gradient path, so a 0-d tensor that requires grad (a learnable temperature)
            # is read as a 1-element buffer, whose gradient the backward computes; the view keeps autograd's link.
            proxy = self._buffer(obj.reshape(1), hint, source, identity=id(obj))
            self.leaves[-1].origin = obj
            return obj if self.ctx is None else proxy[0]
        leaf = Leaf("buffer", obj, buffer_dtype(obj.dtype), hint, source)
        identity = id(obj) if identity is None else identity
        alias = self._buffers.get(identity)
        leaf.alias_of = alias
        self._buffers.setdefault(identity, len(self.leaves))
        self.leaves.append(leaf)
        device = str(obj.device.type) if is_torch_tensor(obj) else "cpu"
        # (int: a trace bakes the capture's shape in (index clamps); torch.export's non-strict tracing gives SymInts,
        # which do not hash, and int() specialises the export on them, as the trace does)
        self.key.append(("buffer", dtype_name(obj.dtype), tuple(int(s) for s in obj.shape), device, alias))
        if self.ctx is None:
            return obj
        from ._proxy import BufferProxy

        leaf.name = self.leaves[alias].name if alias is not None else self.ctx.unique_name(sanitize(hint))
        return BufferProxy(leaf.name, obj)

    # ---- dispatch ----
    def visit(self, obj, hint, source, depth=0):
        if isinstance(obj, enum.Enum):  # before int / str: an IntEnum or StrEnum member is itself, not a number
            self.key.append(("enum", type(obj), obj.name))
            if not plain_enum(obj):
                self.refs.append(obj)  # a value that can change in place, methods of its own: volatile
            return obj
        if isinstance(obj, _CONSTANTS) or isinstance(obj, np.bool_):
            self.key.append(("const", obj))
            return obj
        if isinstance(obj, int):
            return self._scalar(obj, "i32" if -(2**31) <= obj < 2**31 else "i64", hint, source)
        if isinstance(obj, float):
            return self._scalar(obj, "f32", hint, source)
        if isinstance(obj, np.generic) and obj.dtype.kind in "iuf":
            return self._scalar(obj, scalar_type(obj.dtype), hint, source)
        if isinstance(obj, np.ndarray) or is_torch_tensor(obj):
            return self._buffer(obj, hint, source)
        if depth >= _MAX_DEPTH:
            return self._opaque(obj)
        if isinstance(obj, types.FunctionType):
            return self._function(obj, hint, source, depth)
        if isinstance(obj, functools.partial):
            return self._partial(obj, hint, source, depth)
        if isinstance(obj, types.MethodType):
            self.key.append(("method", id(obj.__self__)))
            self.refs.append(obj.__self__)
            fn = self.visit(obj.__func__, hint, source, depth + 1)
            return obj if fn is obj.__func__ else types.MethodType(fn, obj.__self__)
        if type(obj) in (tuple, list) and len(obj) <= _MAX_CONTAINER:
            self.key.append((type(obj), len(obj)))
            new = [self.visit(x, f"{hint}_{i}", f"{source}[{i}]", depth + 1) for i, x in enumerate(obj)]
            changed = any(a is not b for a, b in zip(new, obj))
            return type(obj)(new) if changed else obj
        if type(obj) is dict and len(obj) <= _MAX_CONTAINER and all(isinstance(k, str) for k in obj):
            self.key.append(("dict", tuple(obj)))
            new = {k: self.visit(v, f"{hint}_{k}", f"{source}[{k!r}]", depth + 1) for k, v in obj.items()}
            return new if any(new[k] is not obj[k] for k in obj) else obj
        if _has(obj, "__dlpack__") and _has(obj, "shape") and not isinstance(obj, type):
            return self._buffer(np.from_dlpack(obj), hint, source)
        return self._opaque(obj)

    def _opaque(self, obj):
        if isinstance(obj, types.ModuleType):
            self.key.append(("module", obj.__name__))
        else:
            # Keyed by identity; the cache entry keeps a reference, so the id cannot be reused while
            # the entry lives. Attributes of such objects are read at trace time (torch tensors among
            # them are still bound per call, see _dispatch._getitem).
            self.key.append(("object", type(obj).__qualname__, id(obj)))
            self.refs.append(obj)
        return obj

    def _function(self, fn, hint, source, depth):
        if id(fn) in self._memo:
            self.key.append(("seen", fn.__code__))
            return self._memo[id(fn)]
        self._memo[id(fn)] = fn
        code = fn.__code__
        self.key.append(("fn", code))
        if any(not k.startswith("__") for k in fn.__dict__) or not _REFLECTIVE.isdisjoint(_code_names(code, set())):
            self.refs.append(fn)  # its own attributes (helper.k), or globals() / eval: reads the key cannot see
        where = f"of {fn.__qualname__}"
        cells = []
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:
                self.key.append(("empty",))
                cells.append(cell)
                continue
            new = self.visit(value, name, f"closure variable '{name}' {where}", depth + 1)
            cells.append(cell if new is value else types.CellType(new))
        new_globals, defaults, kwdefaults = {}, fn.__defaults__, fn.__kwdefaults__
        if not _is_library(fn):
            for name in sorted(_code_names(code, set())):
                if name in fn.__globals__:
                    value = fn.__globals__[name]
                    new = self.visit(value, name, f"global '{name}' {where}", depth + 1)
                    if new is not value:
                        new_globals[name] = new
            if defaults:
                params = code.co_varnames[code.co_argcount - len(defaults):code.co_argcount]
                defaults = tuple(self.visit(v, p, f"default argument '{p}' {where}", depth + 1)
                                 for p, v in zip(params, defaults))
            if kwdefaults:
                kwdefaults = {k: self.visit(v, k, f"default argument '{k}' {where}", depth + 1)
                              for k, v in kwdefaults.items()}
        self.key.append(("end",))
        changed = (new_globals or any(a is not b for a, b in zip(cells, fn.__closure__ or ()))
                   or defaults is not fn.__defaults__ or kwdefaults is not fn.__kwdefaults__)
        if self.ctx is None or not changed:
            return fn
        g = fn.__globals__
        if new_globals:
            g = dict(g)
            g.update(new_globals)
        new_fn = types.FunctionType(code, g, fn.__name__, defaults, tuple(cells) if fn.__closure__ else None)
        new_fn.__kwdefaults__ = kwdefaults
        new_fn.__qualname__ = fn.__qualname__
        self._memo[id(fn)] = new_fn
        return new_fn

    def _partial(self, p, hint, source, depth):
        self.key.append(("partial", len(p.args), tuple(p.keywords)))
        fn = self.visit(p.func, hint, source, depth + 1)
        args = [self.visit(a, f"{hint}_arg{i}", f"argument {i} of partial {source}", depth + 1)
                for i, a in enumerate(p.args)]
        kw = {k: self.visit(v, k, f"argument '{k}' of partial {source}", depth + 1) for k, v in p.keywords.items()}
        if self.ctx is None:
            return p
        return functools.partial(fn, *args, **kw)


def walk(fn, ctx=None):
    """(key, leaves, refs, replacement) of a mod; replacement is the proxied copy when ctx is given."""
    w = Walker(ctx)
    new = w.visit(fn, getattr(fn, "__name__", "mod"), "the mod")
    return tuple(w.key), w.leaves, w.refs, new
