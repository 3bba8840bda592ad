"""The attribute reads of a bound-method mod's trace, recorded, so the trace can be cached soundly.

A bound method that reads `self.softcap` or `self.cfg.window` makes the capture walk volatile: those numbers are
constants of the trace, not part of the walk's key, so such mods were traced on every call (~0.25 ms of host time).
A summary of everything reachable from `self` as part of the key was tried and reverted (session 39: two reviews
found 37 ways it missed what a trace reads). Here the trace itself says what it read: `self` is replaced, for the
trace only, by a Recorder whose attribute reads log (path, what was found) and hand the trace the same value. A cached
trace is reused when every logged read gives the same result again, which is exactly the condition for the Python of
the mod to run the same way. Anything the log cannot replay (a tensor, a property, a submodule call, a special method,
an assignment, __dict__) marks the log incomplete: that trace is not cached, and the mod keeps being traced on every
call, as before.
"""
from __future__ import annotations

import enum
import types
import weakref

from . import _capture
from ._arrays import torch_module

_SIMPLE = (bool, int, float, str, type(None), complex)
_MAX_READS = 64
_MISSING = object()


class Log:
    """The reads of one trace: [(path, kind, what)], and whether they describe everything it took from `self`."""

    def __init__(self):
        self.reads, self.complete, self.anchors = [], True, []

    def incomplete(self):
        self.complete = False

    def add(self, path, kind, what):
        if len(self.reads) >= _MAX_READS:
            self.complete = False
        else:
            self.reads.append((path, kind, what))


def eligible(fn, key, refs) -> bool:
    """A bound method of a plain object (or nn.Module) whose walk reached nothing else that is volatile."""
    if type(fn) is not types.MethodType:
        return False
    obj = fn.__self__
    if isinstance(obj, (type, types.ModuleType)) or not _plain_class(type(obj)):
        return False
    if any(type(k) is tuple and len(k) == 2 and k[0] == "module" and not _capture._is_library_name(k[1])
           for k in key):
        return False
    return all(o is obj or not _capture.volatile((), [o]) for o in refs)


def _plain_class(cls) -> bool:
    """Attribute lookup as plain Python does it (nn.Module's __getattr__, which reads its parameter / buffer /
    submodule tables, included): no __getattribute__ / other __getattr__, instances with a __dict__."""
    torch = torch_module()
    module = torch.nn.Module if torch is not None else None
    for c in cls.__mro__:
        own = vars(c)
        if c is object:
            continue
        if "__getattribute__" in own or ("__getattr__" in own and c is not module):
            return False
    return any("__dict__" in vars(c) for c in cls.__mro__ if c is not object)  # instances have a __dict__


def _resolve(obj, name):
    """(kind, value) of obj.name as Python finds it: "value" (a simple value: instance, class or nn.Module
    attribute), "object" (a plain object to look into), "method" (a function on the class), "enum", "missing",
    or None (anything a replay could not check: a property, a tensor, a function in the instance, ...)."""
    cls = type(obj)
    try:
        static = _lookup_class(cls, name)
        table = object.__getattribute__(obj, "__dict__")
    except Exception:  # noqa: BLE001
        return None, _MISSING
    if static is not _MISSING and (hasattr(type(static), "__set__") or hasattr(type(static), "__delete__")):
        return None, _MISSING  # a data descriptor (property, slot): its getter reads what the log cannot see
    if name in table:
        return _kind(table[name])
    if static is not _MISSING:
        if type(static) is types.FunctionType:
            return "method", static
        if hasattr(type(static), "__get__"):
            return None, _MISSING  # staticmethod, classmethod, other descriptors
        return _kind(static)
    for tab in ("_parameters", "_buffers", "_modules"):  # nn.Module.__getattr__
        d = table.get(tab)
        if type(d) is dict and name in d:
            return _kind(d[name])
    return "missing", None


def _lookup_class(cls, name):
    for c in cls.__mro__:
        d = vars(c)
        if name in d:
            return d[name]
    return _MISSING


def _frozen(v):
    """v as a comparable record when it is a simple value or a small exact container of them, else _MISSING."""
    t = type(v)
    if t is float:
        return (float, v.hex())  # -0.0 and 0.0 differ; nan equals itself
    if t is complex:
        return (complex, v.real.hex(), v.imag.hex())
    if t in _SIMPLE:
        return (t, v)
    if t in (tuple, list) and len(v) <= _capture._MAX_CONTAINER:
        items = tuple(_frozen(x) for x in v)
        return _MISSING if any(x is _MISSING for x in items) else (t, items)
    if t is dict and len(v) <= _capture._MAX_CONTAINER and all(type(k) in (str, int) for k in v):
        items = tuple((type(k), k, _frozen(x)) for k, x in v.items())
        return _MISSING if any(x[2] is _MISSING for x in items) else (dict, items)
    return _MISSING


def _kind(v):
    if _frozen(v) is not _MISSING:
        return "value", v
    if isinstance(v, enum.Enum):
        return "enum", v
    torch = torch_module()
    plain = (hasattr(v, "__dict__") and not isinstance(v, (type, types.ModuleType, types.FunctionType, types.MethodType))
             and not _capture.is_torch_tensor(v) and not isinstance(v, (dict, list, tuple, set, int, float, str))
             and not callable(v) and _plain_class(type(v)))
    if torch is not None and isinstance(v, torch.nn.Module):
        plain = _plain_class(type(v))  # a submodule: read into (calling it is not: __call__ is a special method)
    return ("object", v) if plain else (None, v)


class Recorder:
    """`self` for one trace: each attribute read is logged and answered with the real value (a Recorder for a plain
    object, so reads into it are logged too; a method bound to this Recorder, so its reads are). Special methods
    (isinstance aside) and assignments end the log's completeness and act on the real object."""
    __slots__ = ("_obj", "_path", "_log")

    def __init__(self, obj, path, log):
        object.__setattr__(self, "_obj", obj)
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_log", log)

    def __getattribute__(self, name):
        obj, path, log = (object.__getattribute__(self, n) for n in ("_obj", "_path", "_log"))
        if name == "__class__":  # isinstance(self, Layer) holds as for the real object
            return type(obj)
        if name.startswith("__") and name.endswith("__"):
            log.incomplete()
            return getattr(obj, name)
        kind, value = _resolve(obj, name)
        here = path + (name,)
        if kind == "value":
            log.add(here, "value", _frozen(value))
            return value
        if kind == "enum":
            log.anchors.append(type(value))
            log.add(here, "enum", (id(type(value)), value.name))
            return value
        if kind == "object":
            log.add(here, "object", id(type(value)))
            log.anchors.append(type(value))
            return Recorder(value, here, log)
        if kind == "method":  # a helper method: its reads of self are logged; what it captures is compared
            state = _function_state(value)
            if state is None:
                log.incomplete()
            log.add(here, "method", (id(value), state))
            log.anchors.append(value)
            return types.MethodType(value, self)
        if kind == "missing":
            log.add(here, "missing", None)
            return getattr(obj, name)  # (raises AttributeError as the real lookup does, or answers a __getattr__)
        log.incomplete()
        return getattr(obj, name)

    def __setattr__(self, name, value):
        object.__getattribute__(self, "_log").incomplete()
        setattr(object.__getattribute__(self, "_obj"), name, value)

    def __delattr__(self, name):
        object.__getattribute__(self, "_log").incomplete()
        delattr(object.__getattribute__(self, "_obj"), name)


def _special(name):
    def method(self, *args, **kwargs):
        object.__getattribute__(self, "_log").incomplete()
        return getattr(object.__getattribute__(self, "_obj"), name)(*args, **kwargs)
    method.__name__ = name
    return method


for _name in ("__call__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__bool__",
              "__len__", "__iter__", "__contains__", "__getitem__", "__setitem__", "__repr__", "__str__",
              "__format__", "__int__", "__float__", "__index__", "__add__", "__mul__", "__sub__", "__truediv__"):
    setattr(Recorder, _name, _special(_name))


def matches(reads, obj) -> bool:
    """Whether every logged read of `obj` gives the same result now."""
    for path, kind, what in reads:
        target = obj
        for name in path[:-1]:
            k, target = _resolve(target, name)
            if k != "object":
                return False
        k, value = _resolve(target, path[-1])
        if k != kind:
            return False
        if kind == "value" and _frozen(value) != what:
            return False
        if kind == "enum" and (id(type(value)), value.name) != what:
            return False
        if kind == "object" and id(type(value)) != what:
            return False
        if kind == "method" and (id(value), _function_state(value)) != what:
            return False
    return True


def _function_state(fn):
    """What a helper method captures, as comparable records: the globals its code names, its cells and defaults
    (simple values; library modules, functions and classes by identity), or None when something else is there (a
    user object, function or module, whose insides the log does not see)."""
    out = []
    g = fn.__globals__
    values = [("g", n, g[n]) for n in sorted(_capture._code_names(fn.__code__, set())) if n in g]
    values += [("c", i, c.cell_contents) for i, c in enumerate(fn.__closure__ or ()) if _has_contents(c)]
    values += [("d", i, v) for i, v in enumerate(fn.__defaults__ or ())]
    if fn.__kwdefaults__:
        return None
    for where, n, v in values:
        frozen = _frozen(v)
        if frozen is not _MISSING:
            out.append((where, n, frozen))
        elif _library_object(v):
            out.append((where, n, id(v)))  # a library module, function or class: unchanging
        else:
            return None
    return tuple(out)


def _library_object(v) -> bool:
    if isinstance(v, types.ModuleType):
        name = v.__name__
    elif isinstance(v, types.BuiltinFunctionType) and isinstance(getattr(v, "__self__", None), types.ModuleType):
        name = v.__self__.__name__
    elif isinstance(v, (types.FunctionType, types.BuiltinFunctionType, type)):
        name = getattr(v, "__module__", None) or ""
    else:
        return False
    return _capture._is_library_name(name)


def _has_contents(cell):
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


def weak_anchors(log):
    """Weak references to what the log names by identity (classes, functions): the entry is stale once one dies, so
    an id in the log is never another object's."""
    out = []
    for a in log.anchors:
        try:
            out.append(weakref.ref(a))
        except TypeError:
            out.append(lambda a=a: a)
    return out
