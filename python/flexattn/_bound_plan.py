"""Binding plans: the current values of a (score_mod, mask_mod) pair's captures, re-read at every call
without re-running the tracer's walk. Used by paged_attention's CUDA path, which runs once per generated
token: there the tracer's per-call work (walk the captures to build the cache key, look the trace up, build
TracedMods, merge them) was ~50 us of host time a step on an H200 host (measured, session 6), more than
the GPU time of a short sliding-window step.

A plan is built for one pair of mod objects after the tracer has bound it (the same pair seen twice). It is
_capture.walk compiled into a flat list of checks: every node the walk visits is fetched from its parent by
the same access (closure cell, global, default, partial argument, container item) and checked to be what
makes the walk produce the same key -- the same function object with the same code, a Python int still on
the same side of the i32 range, a tensor of the same type, dtype, shape and device, the same aliasing
among the captured tensors, an absent global still absent, ... When every check holds, walk() would give
the same key and the same leaves in the same order, so trace() would return the same cached entry (its
data-dependent guards are evaluated again here, and the tracer's clear_cache() retires every plan): the
plan then hands back the leaves' values read at this call, exactly what the traced path binds. A Python
number captured by a closure, rebound between calls, is read again; a captured tensor is passed as itself
(the kernels read its memory at run time, so an in-place edit is seen). When a check fails the caller
takes the full path, which rebuilds the plan; a pair whose plan keeps failing stops getting one.

Checks are stricter than the walk where that is simpler (identity for functions, modules and objects the
walk keys by id; the exact device of a tensor): a stricter check only sends a call to the full path.
"""
from __future__ import annotations

import enum
import functools
import operator
import types
import weakref

import numpy as np

from . import _capture, _tracer
from ._arrays import is_torch_tensor

_PLANS = {}  # (id(score_mod), id(mask_mod)) -> _Plan or _Seen
_MAX_PLANS = 256
_MAX_FAILURES = 4  # a pair whose plan failed this often (its structure keeps changing) gets none again...
_SETTLED = 64  # ...unless the plan had served this many calls first (a rare change, e.g. a regrown buffer)


class _NoPlan(Exception):
    """The walk meets something a plan does not re-read (a DLPack producer the walk converts)."""


def _ref(obj):
    """A weak reference, or a strong one for objects that take none (as _tracer._weak: the trace cache
    holds those strongly too)."""
    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj


def _tag(obj, depth):
    """Which branch of _capture.Walker.visit takes obj (same tests, same order)."""
    if isinstance(obj, enum.Enum):
        return "enum"
    if isinstance(obj, _capture._CONSTANTS) or isinstance(obj, np.bool_):
        return "const"
    if isinstance(obj, int):
        return "int"
    if isinstance(obj, float):
        return "float"
    if isinstance(obj, np.generic) and obj.dtype.kind in "iuf":
        return "npscalar"
    if isinstance(obj, np.ndarray) or is_torch_tensor(obj):
        return "array"
    if depth >= _capture._MAX_DEPTH:
        return "opaque"
    if isinstance(obj, types.FunctionType):
        return "function"
    if isinstance(obj, functools.partial):
        return "partial"
    if isinstance(obj, types.MethodType):
        return "method"
    if type(obj) in (tuple, list) and len(obj) <= _capture._MAX_CONTAINER:
        return "seq"
    if type(obj) is dict and len(obj) <= _capture._MAX_CONTAINER and all(isinstance(k, str) for k in obj):
        return "dict"
    if _capture._has(obj, "__dlpack__") and _capture._has(obj, "shape") and not isinstance(obj, type):
        return "dlpack"
    return "opaque"


def _is_i32(v):
    return -(2**31) <= v < 2**31


def _cell_of(i):
    return lambda fn: fn.__closure__[i]


def _contents_of(i):
    return lambda fn: fn.__closure__[i].cell_contents


def _global_of(name):
    return lambda fn: fn.__globals__[name]


def _default_of(i):
    return lambda fn: fn.__defaults__[i]


def _kwdefault_of(name):
    return lambda fn: fn.__kwdefaults__[name]


def _arg_of(i):
    return lambda p: p.args[i]


def _kw_of(name):
    return lambda p: p.keywords[name]


def _empty_cell(cell):
    try:
        cell.cell_contents
    except ValueError:
        return True
    return False


class _Recorder:
    """One walk of one mod, mirroring _capture.Walker (without a TraceContext) and recording, per visited
    node, (parent slot, accessor, check). Slot 0 is the mod; op i fills slot i + 1."""

    def __init__(self):
        self.key, self.ops, self.leaves = [], [], []  # leaves: (slot, kind) in walk order
        self.aliases = []  # per leaf: the walk's alias_of (first leaf holding the same array), or None
        self._memo = set()
        self._buffers = {}

    def _op(self, parent, get, check):
        self.ops.append((parent, get, check))
        return len(self.ops)

    def visit(self, obj, parent, get, depth):
        tag = _tag(obj, depth)
        t = type(obj)
        if tag == "enum":
            if not _capture.plain_enum(obj):
                raise _NoPlan  # volatile in the walk: never cached, so never planned
            self.key.append(("enum", t, obj.name))
            self._op(parent, get, lambda x: x is obj)
        elif tag == "const":
            self.key.append(("const", obj))
            self._op(parent, get, lambda x: type(x) is t and bool(x == obj))
        elif tag == "int":
            small = _is_i32(obj)
            self._scalar(self._op(parent, get, lambda x: type(x) is t and _is_i32(x) == small),
                         "i32" if small else "i64")
        elif tag == "float":
            self._scalar(self._op(parent, get, lambda x: type(x) is t), "f32")
        elif tag == "npscalar":
            self._scalar(self._op(parent, get, lambda x: type(x) is t), _capture.scalar_type(obj.dtype))
        elif tag == "array":
            self._array(obj, parent, get)
        elif tag == "function":
            self._function(obj, parent, get, depth)
        elif tag == "partial":
            self._partial(obj, parent, get, depth)
        elif tag == "method":
            self.key.append(("method", id(obj.__self__)))
            ref = _ref(obj.__self__)
            slot = self._op(parent, get, lambda x: type(x) is types.MethodType and x.__self__ is ref())
            self.visit(obj.__func__, slot, operator.attrgetter("__func__"), depth + 1)
        elif tag == "seq":
            self.key.append((t, len(obj)))
            n = len(obj)
            slot = self._op(parent, get, lambda x: type(x) is t and len(x) == n)
            for i, x in enumerate(obj):
                self.visit(x, slot, operator.itemgetter(i), depth + 1)
        elif tag == "dict":
            keys = tuple(obj)
            self.key.append(("dict", keys))
            slot = self._op(parent, get, lambda x: type(x) is dict and tuple(x) == keys)
            for k, v in obj.items():
                self.visit(v, slot, operator.itemgetter(k), depth + 1)
        elif tag == "dlpack":
            raise _NoPlan("a DLPack producer")  # the walk binds a fresh numpy view of it every time
        else:
            self._opaque(obj, parent, get, depth)

    def _scalar(self, slot, type_, number=True):
        self.key.append(("scalar", type_, number))  # as _capture.Walker._scalar's key: a number, or a 0-d tensor
        self.leaves.append((slot, "scalar"))
        self.aliases.append(None)

    def _array(self, obj, parent, get):
        t, dtype = type(obj), obj.dtype
        if len(obj.shape) == 0:  # a 0-d array / tensor is a runtime scalar...
            if _capture._learnable(obj):  # ...unless it requires grad (the walk reads a 1-element view of it)
                raise _NoPlan("a learnable 0-d tensor")
            self._scalar(self._op(parent, get, lambda x: type(x) is t and x.dtype == dtype and len(x.shape) == 0
                                  and not _capture._learnable(x)), _capture.scalar_type(dtype),
                         number=isinstance(obj, np.generic))
            return
        shape = tuple(obj.shape)
        torch_tensor = is_torch_tensor(obj)
        device = obj.device if torch_tensor else "cpu"
        if torch_tensor:  # the exact device (stricter than the walk's device type, and cheaper to read)
            check = (lambda x: type(x) is t and x.dtype == dtype and x.shape == shape and x.device == device)
        else:
            check = (lambda x: type(x) is t and x.dtype == dtype and x.shape == shape)
        slot = self._op(parent, get, check)
        alias = self._buffers.get(id(obj))
        self._buffers.setdefault(id(obj), len(self.leaves))
        self.key.append(("buffer", _capture.dtype_name(dtype), shape,
                         str(obj.device.type) if torch_tensor else "cpu", alias))
        self.leaves.append((slot, "buffer"))
        self.aliases.append(alias)

    def _opaque(self, obj, parent, get, depth):
        if isinstance(obj, types.ModuleType):
            self.key.append(("module", obj.__name__))
        else:
            self.key.append(("object", type(obj).__qualname__, id(obj)))
        ref = _ref(obj)
        if isinstance(obj, types.ModuleType):
            check = (lambda x: x is ref())
        else:  # the same object; a list / dict the walk found too long could have shrunk since
            check = (lambda x: x is ref() and _tag(x, depth) == "opaque")
        self._op(parent, get, check)

    def _function(self, fn, parent, get, depth):
        ref = _ref(fn)
        if id(fn) in self._memo:
            self.key.append(("seen", fn.__code__))
            self._op(parent, get, lambda x: x is ref())
            return
        self._memo.add(id(fn))
        code, module = fn.__code__, fn.__module__
        self.key.append(("fn", code))
        library = _capture._is_library(fn)
        # What the walk reads of a function besides its children: code, module (library or not), the
        # number of defaults and the kwdefault names it visits, and which code names are globals.
        n_defaults = len(fn.__defaults__ or ()) if not library else None
        kw_names = tuple(fn.__kwdefaults__ or ()) if not library else None
        absent = ()
        if not library:
            absent = tuple(n for n in sorted(_capture._code_names(code, set())) if n not in fn.__globals__)

        def check(x):
            if x is not ref() or x.__code__ is not code or x.__module__ != module:
                return False
            if library:
                return True
            if len(x.__defaults__ or ()) != n_defaults or tuple(x.__kwdefaults__ or ()) != kw_names:
                return False
            if absent:
                g = x.__globals__
                return not any(n in g for n in absent)
            return True

        slot = self._op(parent, get, check)
        for i, (_, cell) in enumerate(zip(code.co_freevars, fn.__closure__ or ())):
            try:
                value = cell.cell_contents
            except ValueError:
                self.key.append(("empty",))
                self._op(slot, _cell_of(i), _empty_cell)
                continue
            self.visit(value, slot, _contents_of(i), depth + 1)
        if not library:
            for name in sorted(_capture._code_names(code, set())):
                if name in fn.__globals__:
                    self.visit(fn.__globals__[name], slot, _global_of(name), depth + 1)
            for i, v in enumerate(fn.__defaults__ or ()):
                self.visit(v, slot, _default_of(i), depth + 1)
            for k, v in (fn.__kwdefaults__ or {}).items():
                self.visit(v, slot, _kwdefault_of(k), depth + 1)
        self.key.append(("end",))

    def _partial(self, p, parent, get, depth):
        t, n, keys = type(p), len(p.args), tuple(p.keywords)
        self.key.append(("partial", n, keys))
        slot = self._op(parent, get, lambda x: type(x) is t and len(x.args) == n and tuple(x.keywords) == keys)
        self.visit(p.func, slot, operator.attrgetter("func"), depth + 1)
        for i, a in enumerate(p.args):
            self.visit(a, slot, _arg_of(i), depth + 1)
        for k, v in p.keywords.items():
            self.visit(v, slot, _kw_of(k), depth + 1)


class _Program:
    """The recorded walk of one mod: run(mod) -> its leaves' current values in walk order, or None when a
    check fails (then walk() could give another key)."""

    def __init__(self, fn):
        rec = _Recorder()
        rec.visit(fn, 0, None, 0)
        self.key, self.ops = tuple(rec.key), rec.ops
        self.leaf_slots = tuple(s for s, _ in rec.leaves)
        self.kinds = tuple(k for _, k in rec.leaves)
        # (leaf index, the walk's alias index) of the arrays, when aliasing can differ (two or more)
        arrays = [(i, a) for i, ((_, kind), a) in enumerate(zip(rec.leaves, rec.aliases)) if kind == "buffer"]
        self.arrays = tuple(arrays) if len(arrays) > 1 else ()

    def run(self, fn):
        vals = [fn]
        try:
            for parent, get, check in self.ops:
                x = vals[parent] if get is None else get(vals[parent])
                if not check(x):
                    return None
                vals.append(x)
        except Exception:  # noqa: BLE001 - a cell emptied, a global deleted, a shorter defaults tuple, ...
            return None  # the full path walks again and reports what is wrong, as before
        leaves = [vals[s] for s in self.leaf_slots]
        if self.arrays:  # the walk keys each array by the first leaf holding the same object
            first = {}
            for i, alias in self.arrays:
                if first.setdefault(id(leaves[i]), i) != (i if alias is None else alias):
                    return None
        return leaves


def _python_value(v):
    """_capture.Leaf.python_value of a scalar leaf."""
    return v if isinstance(v, (int, float)) else v.item()


class _Plan:
    def __init__(self, mods, traced, programs, merged, variant, snames, bnames):
        self.refs = tuple(None if m is None else weakref.ref(m) for m in mods)
        self.entries = tuple(None if t is None else t.entry for t in traced)
        self.programs = programs
        self.generation = _tracer.generation
        self.failures = self.hits = 0
        self.variant, self.snames, self.bnames = variant, snames, bnames

        def first_leaf(idx, name, kind):
            names = self.entries[idx].leaf_names
            kinds = programs[idx].kinds
            return next(i for i, (n, k) in enumerate(zip(names, kinds)) if n == name and k == kind)

        # TracedMod binds each name to its first leaf: the same leaf here.
        self.scalars = tuple((i, first_leaf(i, n, "scalar")) for _, i, n in merged.scalars)
        self.buffers = tuple((i, first_leaf(i, n, "buffer")) for _, i, n in merged.buffers)

    def read(self, mods):
        """(variant, scalar names, buffer names, scalar values as floats, buffer objects), or None."""
        if _tracer.generation != self.generation:
            return None
        leaves = [None, None]
        for i in (0, 1):
            if mods[i] is None:
                continue
            got = self.programs[i].run(mods[i])
            if got is None:
                return None
            entry = self.entries[i]
            if not entry.alive():
                return None
            if entry.guards:  # trace() picks the entry whose guards hold for these scalar values
                scalars = {n: _python_value(v) for n, v, k in zip(entry.leaf_names, got, self.programs[i].kinds)
                           if k == "scalar"}
                if not entry.guards_hold(scalars):
                    return None
            leaves[i] = got
        self.hits += 1
        # float(): the value the traced path's float64 scalar tensor holds (_torch_api._scalar_tensor)
        values = [float(_python_value(leaves[i][j])) for i, j in self.scalars]
        return self.variant, self.snames, self.bnames, values, [leaves[i][j] for i, j in self.buffers]


class _Seen:
    """A pair met once on the full path: a plan is built the second time (a pair made fresh for every
    call never pays for one)."""

    def __init__(self, mods, failures=0):
        self.refs = tuple(None if m is None else weakref.ref(m) for m in mods)
        self.failures = failures


def _alive(holder, mods):
    """Whether holder was made for these very mod objects (its weak references still point at them)."""
    (r0, r1), (score_mod, mask_mod) = holder.refs, mods
    return (score_mod is None if r0 is None else r0() is score_mod) and r1 is not None and r1() is mask_mod


def bound(score_mod, mask_mod):
    """(variant, scalar names, buffer names, scalar values (floats), captured buffers) of the mods with
    their current captured values: what _torch_api._bound_values + _torch_ops._bind give, through a plan
    when one holds."""
    key = (id(score_mod), id(mask_mod))
    mods = (score_mod, mask_mod)
    held = _PLANS.get(key)
    if held is not None and not _alive(held, mods):
        held = None  # a dead pair whose ids were reused
    if type(held) is _Plan:
        got = held.read(mods)
        if got is not None:
            return got
        if held.hits < _SETTLED:
            held.failures += 1
    result, parts = _full(score_mod, mask_mod)
    try:
        if held is None:
            if parts is not None:
                _store(key, _Seen(mods))
        elif held.failures < _MAX_FAILURES and parts is not None:
            _store(key, _build(mods, *parts, result, held.failures))
        elif type(held) is _Plan:  # its structure keeps changing: the traced path from now on
            _store(key, _Seen(mods, _MAX_FAILURES))
    except TypeError:
        pass  # a mod that takes no weak reference: no plan
    return result


def _store(key, value):
    if len(_PLANS) >= _MAX_PLANS and key not in _PLANS:
        _PLANS.clear()
    _PLANS[key] = value


def _full(score_mod, mask_mod):
    """The traced path: (result, (TracedMods, Merged) or None when no plan may be built)."""
    from . import _torch_api, _torch_ops

    torch = _torch_api.torch
    if torch.compiler.is_compiling():
        spec, svals, bvals = _torch_api._bound_values(score_mod, mask_mod)
        parts = None
    else:
        ts = None if score_mod is None else _tracer.trace(score_mod, "score_mod")
        tm = _tracer.trace(mask_mod, "mask_mod")
        merged, spec = _torch_api._merged_and_spec(ts, tm)
        scalars, buffers = merged.values(ts, tm)
        svals = [scalars[n] for n, _, _ in merged.scalars]
        bvals = [buffers[n] for n, _, _ in merged.buffers]
        # tensors reached through an attribute are bound by identity at trace time: never planned
        parts = None if any(t is not None and t.extra for t in (ts, tm)) else ((ts, tm), merged)
    variant, snames, bnames = _torch_ops._decode(spec, "")
    values = _torch_api._scalar_tensor(svals).tolist() if svals else []
    if len(values) != len(snames) or len(bvals) != len(bnames):
        raise ValueError(f"flexattn::attn: the spec names {len(snames)} scalars and {len(bnames)} buffers, got "
                         f"{len(values)} and {len(bvals)}")
    return (variant, snames, bnames, values, bvals), parts


def _build(mods, traced, merged, result, failures):
    """A _Plan for the pair, or a _Seen carrying the failure count when the walk cannot be planned or
    does not match the traced entries (e.g. a capture changed between the trace and this walk)."""
    try:
        programs = tuple(None if m is None else _Program(m) for m in mods)
        for m, t, p in zip(mods, traced, programs):
            if m is None:
                continue
            key, leaves, _, _ = _capture.walk(m)
            got = p.run(m)
            if (p.key != key or got is None or len(got) != len(leaves)
                    or any(a is not b.value for a, b in zip(got, leaves))
                    or not _tracer.entry_cached((_tracer.mod_kind(m),) + key, t.entry)):
                return _Seen(mods, failures + 1)
        plan = _Plan(mods, traced, programs, merged, *result[:3])
    except Exception:  # noqa: BLE001 - _NoPlan, or anything unforeseen: this pair keeps the traced path
        return _Seen(mods, _MAX_FAILURES)
    plan.failures = failures
    return plan
