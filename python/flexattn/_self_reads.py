"""The attribute reads of a bound-method mod's trace, recorded, so the trace can be cached soundly.

A bound method that reads `self.softcap` or `self.cfg.window` makes the capture walk volatile: those numbers are
constants of the trace, not part of the walk's key, so such mods were traced on every call (~0.25 ms of host time).
A summary of everything reachable from `self` as part of the key was tried and reverted (session 39: two reviews
found 37 ways it missed what a trace reads). Here the trace itself says what it read: `self` is replaced, for the
trace only, by a Recorder whose attribute reads log (path, what was found) and hand the trace the same value. A cached
trace is reused when every logged read gives the same result again (and the objects read alias as before), which is
the condition for the mod's Python to run the same way. Anything the log cannot replay (a tensor, a property, a
submodule call, a special method, `__class__`, an assignment) marks it incomplete: such a trace is not cached, the
object is remembered, and its mod is traced on every call as before. Mods whose code could see through the stand-in
(`type(self)`, `vars`, `super`, `id`, ...) are not recorded at all.
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
# names whose use lets code see the stand-in instead of the object (type(self), vars(self), super(), id(self), ...)
_REVEALING = frozenset(("type", "vars", "dir", "id", "super", "__class__", "__dict__", "object", "inspect",
                        "getattr_static", "__self__", "callable", "globals", "locals", "eval", "exec"))
_unrecordable = {}  # id(object) -> (weak reference, codes of its methods whose traces were not recordable)
_MAX_FROZEN = 64  # elements of a value's record in all (nested containers included); larger values are not recorded


class Log:
    """The reads of one trace: [(path, kind, what)], whether they describe everything it took from `self`, and
    the objects met (id -> (Recorder, index of the first read that gave it; -1: self))."""

    def __init__(self, root):
        self.reads, self.complete, self.anchors = [], True, []
        self.met = {id(root): (None, -1)}
        self.containers = {}  # id of a list / dict read -> index of the first read that gave it
        self.held = [root]

    def incomplete(self):
        self.complete = False

    def add(self, path, kind, what):
        if len(self.reads) >= _MAX_READS:
            self.complete = False
        else:
            self.reads.append((path, kind, what))
        return len(self.reads) - 1


def eligible(fn, key, refs) -> bool:
    """A bound method of a plain, weakly referenceable object (or nn.Module) reached only as that method's self, whose
    walk reached nothing else that is volatile, whose code does not look at the object's type, and whose traces
    were recordable before."""
    if type(fn) is not types.MethodType:
        return False
    obj = fn.__self__
    cls = type(obj)
    if isinstance(obj, (type, types.ModuleType)) or not _plain_class(cls) or cls.__weakrefoffset__ == 0:
        return False
    held = _unrecordable.get(id(obj))
    if held is not None and held[0]() is obj and fn.__func__.__code__ in held[1]:
        return False
    if any(type(k) is tuple and len(k) == 2 and k[0] == "module" and not _capture._is_library_name(k[1])
           for k in key):
        return False
    if sum(1 for o in refs if o is obj) != 1:  # also reached through a global or a container: reads bypass the log
        return False
    if any(not _code_ok(k[1]) for k in key if type(k) is tuple and len(k) == 2 and k[0] == "fn"):
        return False
    return all(o is obj or not _capture.volatile((), [o]) for o in refs)


def remember_unrecordable(fn):
    """Keyed by identity (an __eq__ / __hash__ of the object's own is never called); dropped with the object."""
    obj = fn.__self__
    held = _unrecordable.get(id(obj))
    if held is None or held[0]() is not obj:
        key = id(obj)
        held = (weakref.ref(obj, lambda _, key=key: _unrecordable.pop(key, None)), set())
        _unrecordable[key] = held
    held[1].add(fn.__func__.__code__)


def _code_ok(code) -> bool:
    return isinstance(code, types.CodeType) and not (_capture._code_names(code, set()) & _REVEALING)


def _plain_class(cls) -> bool:
    """Attribute lookup as plain Python does it (nn.Module's __getattr__, which reads its parameter / buffer /
    submodule tables, included): no __getattribute__ / other __getattr__, instances with a __dict__."""
    module = _module_class()
    for c in cls.__mro__:
        own = vars(c)
        if c is object:
            continue
        if "__getattribute__" in own or ("__getattr__" in own and c is not module):
            return False
    return any("__dict__" in vars(c) for c in cls.__mro__ if c is not object)  # instances have a __dict__


def _module_class():
    torch = torch_module()
    return torch.nn.Module if torch is not None else None


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
    module = _module_class()
    if module is not None and isinstance(obj, module):
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
    """v as a comparable record when it is a simple value or a small exact container of them (at most _MAX_FROZEN
    elements in all), else _MISSING."""
    budget = [_MAX_FROZEN]
    return _freeze(v, budget)


def _freeze(v, budget):
    budget[0] -= 1
    if budget[0] < 0:
        return _MISSING
    t = type(v)
    if t is float:
        return (float, v.hex())  # -0.0 and 0.0 differ; nan equals itself
    if t is complex:
        return (complex, v.real.hex(), v.imag.hex())
    if t in _SIMPLE:
        return (t, v)
    if t in (tuple, list) and len(v) <= _capture._MAX_CONTAINER:
        items = tuple(_freeze(x, budget) for x in v)
        return _MISSING if any(x is _MISSING for x in items) else (t, items)
    if t is dict and len(v) <= _capture._MAX_CONTAINER and all(type(k) in (str, int) for k in v):
        items = tuple((type(k), k, _freeze(x, budget)) for k, x in v.items())
        return _MISSING if any(x[2] is _MISSING for x in items) else (dict, items)
    return _MISSING


def _kind(v):
    if _frozen(v) is not _MISSING:
        return "value", v
    if isinstance(v, enum.Enum):
        return ("enum", v) if _capture.plain_enum(v) else (None, v)
    module = _module_class()
    if module is not None and isinstance(v, module):
        return ("object", v) if _plain_class(type(v)) and type(v).__weakrefoffset__ else (None, v)
    plain = (hasattr(type(v), "__dict__") and not isinstance(v, (type, types.ModuleType, types.FunctionType,
                                                                 types.MethodType))
             and not _capture.is_torch_tensor(v) and not isinstance(v, (dict, list, tuple, set, int, float, str))
             and not callable(v) and _plain_class(type(v)))
    return ("object", v) if plain else (None, v)


class Unrecordable(Exception):
    """Ends a recorded trace (an assignment to the object): the plain trace runs instead."""


class Recorder:
    """`self` for one trace: each attribute read is logged and answered with the real value (the one Recorder of a
    plain sub-object, so reads into it are logged and `a is b` holds as for the objects; a method bound to this
    Recorder, so its reads are). Special methods and assignments end the log's completeness and act on the real
    object."""
    __slots__ = ("_obj", "_path", "_log")

    def __init__(self, obj, path, log):
        object.__setattr__(self, "_obj", obj)
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_log", log)

    def __getattribute__(self, name):
        obj, path, log = (object.__getattribute__(self, n) for n in ("_obj", "_path", "_log"))
        if name.startswith("__") and name.endswith("__"):  # __class__ included: reads through it bypass the log
            log.incomplete()
            return getattr(obj, name)
        try:
            kind, value = _resolve(obj, name)
        except Exception:  # noqa: BLE001
            kind, value = None, _MISSING
        here = path + (name,)
        if kind == "value":  # a list / dict also by which earlier read gave the same one (a is b)
            alias = None
            if type(value) in (list, dict):
                alias = log.containers.setdefault(id(value), len(log.reads))
                log.held.append(value)
            log.add(here, "value", (_frozen(value), alias))
            return value
        if kind == "enum":
            log.anchors.append(type(value))
            log.add(here, "enum", (id(type(value)), value.name))
            return value
        if kind == "object":
            seen = log.met.get(id(value))
            if seen is not None and seen[0] is None:  # self itself (self.parent = self)
                log.add(here, "object", (id(type(value)), -1))
                return log.root
            i = log.add(here, "object", (id(type(value)), seen[1] if seen is not None else len(log.reads)))
            if seen is not None:
                return seen[0]
            rec = Recorder(value, here, log)
            log.met[id(value)] = (rec, i)
            log.held.append(value)
            log.anchors.append(type(value))
            return rec
        if kind == "method":  # a helper method: its reads of self are logged; what it captures is compared
            state = _function_state(value)
            if state is None or not _code_ok(value.__code__):
                log.incomplete()
            log.add(here, "method", (id(value), state))
            log.anchors += [value, value.__code__]
            return types.MethodType(value, self)
        if kind == "missing":
            log.add(here, "missing", None)
            return getattr(obj, name)  # (raises AttributeError as the real lookup does)
        log.incomplete()
        return getattr(obj, name)

    def __setattr__(self, name, value):  # the mod changes its object: the plain trace does it, once
        object.__getattribute__(self, "_log").incomplete()
        raise Unrecordable(name)

    def __delattr__(self, name):
        object.__getattribute__(self, "_log").incomplete()
        raise Unrecordable(name)


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


def recorder(obj):
    """(the Recorder standing for obj, its Log)."""
    log = Log(obj)
    log.root = Recorder(obj, (), log)
    return log.root, log


def matches(reads, obj, memo) -> bool:
    """Whether every logged read of `obj` gives the same result now, with the objects read aliasing as logged.
    memo: {path: (kind, value)} shared by the entries tried in one call."""
    try:
        found = []  # the object, list or dict of each read (None for others), by index
        for path, kind, what in reads:
            k, value = _resolve_path(obj, path, memo)
            found.append(value if k == "object" or (k == "value" and type(value) in (list, dict)) else None)
            if k != kind:
                return False
            if kind == "value":
                frozen = memo.get(("frozen", path))
                if frozen is None:
                    frozen = memo[("frozen", path)] = _frozen(value)
                i = len(found) - 1
                alias = None if type(value) not in (list, dict) else next(
                    (j for j in range(i) if found[j] is value), i)
                if (frozen, alias) != what:
                    return False
            if kind == "enum" and (id(type(value)), value.name) != what:
                return False
            if kind == "object":
                i = len(found) - 1
                alias = -1 if value is obj else next((j for j in range(i) if found[j] is value), i)
                if (id(type(value)), alias) != what:
                    return False
            if kind == "method":
                state = memo.get(("state", path))
                if state is None:
                    state = memo[("state", path)] = (_function_state(value),)
                if (id(value), state[0]) != what:
                    return False
        return True
    except Exception:  # noqa: BLE001 - a lookup that raises now: trace again (which raises as it should)
        return False


def _resolve_path(obj, path, memo):
    got = memo.get(path)
    if got is None:
        if len(path) == 1:
            got = _resolve(obj, path[0])
        else:
            k, parent = _resolve_path(obj, path[:-1], memo)
            got = _resolve(parent, path[-1]) if k == "object" else (None, _MISSING)
        memo[path] = got
    return got


def _function_state(fn):
    """What a helper method captures, as comparable records: its code, its attributes, the globals its code names,
    its cells and defaults (simple values; library modules, functions and classes by identity), or None when
    something else is there (a user object, function or module, whose insides the log does not see)."""
    if fn.__kwdefaults__:
        return None
    attrs = _frozen(dict(fn.__dict__)) if fn.__dict__ else None
    if attrs is _MISSING:
        return None
    out = [("code", id(fn.__code__)), ("attrs", attrs)]
    g = fn.__globals__
    values = [("g", n, g[n]) for n in sorted(_capture._code_names(fn.__code__, set())) if n in g]
    values += [("c", i, c.cell_contents) for i, c in enumerate(fn.__closure__ or ()) if _has_contents(c)]
    values += [("d", i, v) for i, v in enumerate(fn.__defaults__ or ())]
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
    elif isinstance(v, types.FunctionType) and v.__closure__:
        return False  # a library function made over user functions (and_masks(...)): what it calls can change
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
    """Weak references to what the log names by identity (classes, functions, code): the entry is stale once one
    dies, so an id in the log is never another object's."""
    out = []
    for a in log.anchors:
        try:
            out.append(weakref.ref(a))
        except TypeError:
            out.append(lambda a=a: a)
    return out
