"""trace(): a Python score_mod / mask_mod -> IR (text form) + the values to bind at run time.

A mod is called once with proxies for (score,) b, h, q_idx, kv_idx and for everything it captures; the
operations it performs build the IR. The result is cached by (code objects, capture structure): calling
trace() again on the same mod, or on a fresh closure of the same code with other numbers or tensors,
only re-reads the captured values. Python numbers and 0-d tensors become named runtime scalars, so
changing them never changes the IR; tensors become buffers (dtype and shape are part of the key).
"""
from __future__ import annotations

import collections
import functools
import inspect
import os
import threading
import types
import weakref

import numpy as np

from . import _capture, _ir, _self_reads
from ._arrays import buffer_to_numpy, torch_module
from ._capture import walk
from ._context import TraceContext, TraceError, tracing
from ._print import print_text
from ._proxy import BufferProxy, Proxy, as_node

_CACHE_SIZE = 1024  # traces kept (LRU); a bound method of each live instance takes a key of its own
_ENTRIES_PER_KEY = 16  # traces kept per key (one per set of guard values, or of values read through self, seen)
_cache: "collections.OrderedDict" = collections.OrderedDict()
_lock = threading.Lock()
stats = {"hits": 0, "misses": 0, "traces": 0}
# Bumped by clear_cache(): what was derived from cached entries outside this module (_bound_plan's plans)
# is retired with them, so a cleared cache re-traces as if nothing had been seen.
generation = 0


def mod_name(fn) -> str:
    f = fn.func if hasattr(fn, "func") and hasattr(fn, "keywords") else fn
    return getattr(f, "__qualname__", None) or getattr(type(f), "__qualname__", repr(f))


_KIND_OF_CODE = {}  # (code object, number of defaults, bound method) -> kind; see mod_kind


def mod_callable(fn):
    """What flexattn walks and calls for a mod: torch calls any callable, so an nn.Module stands for its forward
    and a callable object for its __call__ (bound methods, whose `self` the walk reads)."""
    if type(fn) in (types.FunctionType, types.MethodType) or isinstance(fn, (functools.partial, type)):
        return fn
    torch = torch_module()
    if torch is not None and isinstance(fn, torch.nn.Module):
        return fn.forward
    if callable(fn) and not isinstance(fn, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        call = getattr(fn, "__call__", None)
        if type(call) is types.MethodType:
            return call
    return fn


_ANY = "any"  # _KIND_OF_CODE's entry for a signature that does not tell (e.g. a wrapper taking *args)


def mod_kind(fn):
    """'score_mod' (5 positional parameters without defaults) or 'mask_mod' (4), as torch decides; None when the
    signature cannot tell (`*args`: a decorator's wrapper), where the slot the mod was passed in decides."""
    if not callable(fn):
        raise TypeError(f"flexattn: a mod must be callable, got {type(fn).__name__}")
    # inspect.signature costs ~30 us a call (measured), paid on every flex_attention call before this
    # cache; for a plain function the answer depends only on its code and how many defaults it has.
    bound = type(fn) is types.MethodType  # a bound method's signature is its function's without `self`
    f = fn.__func__ if bound else fn
    plain = (type(f) is types.FunctionType and not f.__kwdefaults__ and "__wrapped__" not in f.__dict__
             and "__signature__" not in f.__dict__)
    if plain:
        code = f.__code__
        key = (code, len(f.__defaults__ or ()), bound)
        kind = _KIND_OF_CODE.get(key)
        if kind is not None:
            return None if kind is _ANY else kind
    kind = _signature_kind(fn)
    if plain:
        if len(_KIND_OF_CODE) > 4096:
            _KIND_OF_CODE.clear()
        _KIND_OF_CODE[key] = _ANY if kind is None else kind
    return kind


def _signature_kind(fn):
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError) as e:
        raise TypeError(f"flexattn: cannot read the signature of mod {mod_name(fn)!r}: {e}") from None
    n = sum(1 for p in params if p.default is inspect.Parameter.empty and p.kind in (
        inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD))
    if n <= 5 and any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return None
    if n == 5:
        return "score_mod"
    if n == 4:
        return "mask_mod"
    raise TypeError(f"flexattn: mod {mod_name(fn)!r} takes {n} positional parameters without defaults; a "
                    "score_mod takes 5 (score, b, h, q_idx, kv_idx) and a mask_mod 4 (b, h, q_idx, kv_idx)")


def _weak(obj):
    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj  # not weak-referenceable (e.g. a tuple): held strongly


class _Entry:
    """One cached trace: the IR and how to bind a walk's leaves to its scalar and buffer names."""

    def __init__(self, kind, name, root, leaf_names, guards, refs, location):
        self.kind, self.name, self.root, self.leaf_names = kind, name, root, leaf_names
        self.guards, self.location = guards, location
        # The key holds the ids of objects the walk could not look into; while they live their ids
        # cannot be reused, so a live entry with an equal key saw the same objects. Weak references keep
        # the cache from holding on to them (a dead one makes the entry stale).
        self.refs = [_weak(o) for o in refs]
        self.text = print_text(root)
        # Fixed by the IR, so computed once here rather than by every TracedMod bound to this entry.
        self.used_scalars = frozenset(_ir.scalar_names(root))
        self.used_buffers = _ir.buffer_uses(root)

    def alive(self) -> bool:
        return all(r() is not None for r in self.refs)

    def guards_hold(self, scalars) -> bool:
        from ._eval import evaluate

        return all(evaluate(n, {"scalars": scalars}).item() == v for n, v in self.guards)


class TracedMod:
    """A traced mod bound to its current captured values.

    kind: 'score_mod' or 'mask_mod'; name: the mod's __qualname__; text: the IR in text form;
    root: the IR root node; scalars {name: Python number}; buffers {name: the captured array/tensor};
    scalar_types {name: 'f32'|'i32'|'i64'|'bool'}; buffer_dtypes {name: 'f32'|'bf16'|...};
    sources {name: where the value was captured}; cached: whether the IR came from the cache.
    """

    def __init__(self, entry, leaves, extra_buffers, cached, extra_origins=None):
        self.kind, self.name, self.root, self.text = entry.kind, entry.name, entry.root, entry.text
        self.location, self.cached = entry.location, cached
        self.entry, self.extra = entry, bool(extra_buffers)
        used_scalars, used_buffers = entry.used_scalars, entry.used_buffers
        self.scalars, self.scalar_types, self.buffers, self.buffer_dtypes, self.sources = {}, {}, {}, {}, {}
        self.tensor_scalars = {}  # name -> source of the scalars read from 0-d tensors (not Python numbers), used or not
        for leaf, name in zip(leaves, entry.leaf_names):
            if leaf.kind == "scalar" and not isinstance(leaf.value, (int, float, np.generic)):
                self.tensor_scalars.setdefault(name, leaf.source)
            if name in used_scalars and name not in self.scalars:
                self.scalars[name] = leaf.python_value()
                self.scalar_types[name] = leaf.type
                self.sources[name] = leaf.source
            elif name in used_buffers and name not in self.buffers:
                self.buffers[name] = leaf.value
                self.buffer_dtypes[name] = leaf.type
                self.sources[name] = leaf.source
        # What each extra buffer was reached as (a 0-d tensor for its 1-element view): torch.compile looks it up.
        self.extra_origins = dict(extra_origins or {})
        for name, obj in extra_buffers.items():
            self.buffers[name] = obj
            self.buffer_dtypes[name] = used_buffers[name][0]
            self.sources[name] = "a tensor reached through an attribute or container"
        self._np_buffers = None

    def plan(self) -> dict:
        """The binding plan: what the backend must pass with the IR text."""
        return {
            "kind": self.kind, "name": self.name, "text": self.text,
            "scalars": {n: {"type": self.scalar_types[n], "value": v, "source": self.sources[n]}
                        for n, v in self.scalars.items()},
            "buffers": {n: {"dtype": self.buffer_dtypes[n], "shape": tuple(int(s) for s in b.shape),
                            "object": b, "source": self.sources[n]} for n, b in self.buffers.items()},
        }

    def numpy_buffers(self) -> dict:
        if self._np_buffers is None:
            self._np_buffers = {n: buffer_to_numpy(b) for n, b in self.buffers.items()}
        return self._np_buffers

    def evaluate(self, score=None, b=0, h=0, q_idx=0, kv_idx=0):
        """The mod's value over broadcast numpy index grids, with the IR's exact semantics."""
        from ._eval import evaluate

        env = {"score": np.asarray(0.0 if score is None else score, dtype=np.float64), "b": np.asarray(b),
               "h": np.asarray(h), "q_idx": np.asarray(q_idx), "kv_idx": np.asarray(kv_idx),
               "scalars": self.scalars, "buffers": self.numpy_buffers()}
        return evaluate(self.root, env)

    def __repr__(self):
        return f"TracedMod({self.kind} {self.name!r}: {self.text!r})"


def _run(fn, kind, name, key, refs):
    """Traces fn once. Returns (entry, leaves, extra_buffers, their origins)."""
    ctx = TraceContext(kind, name, {})
    with tracing(ctx):
        _, leaves, _, proxied = walk(fn, ctx)
        inputs = ("score", "b", "h", "q_idx", "kv_idx") if kind == "score_mod" else ("b", "h", "q_idx", "kv_idx")
        args = [Proxy(_ir.input_leaf(i)) for i in inputs]
        torch = torch_module()
        try:
            if torch is not None:
                from ._dispatch import make_mode

                with make_mode():
                    result = proxied(*args)
            else:
                result = proxied(*args)
        except TraceError:
            raise
        except Exception as e:
            if hasattr(e, "add_note"):
                e.add_note(f"(while flexattn traced {kind} '{name}' with symbolic arguments)")
            raise
        root = _result_node(result, kind, name, fn)
    code = getattr(fn, "__code__", None)
    location = f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}" if code else ""
    entry = _Entry(kind, name, root, [leaf.name for leaf in leaves], ctx.guards, refs, location)
    return entry, leaves, ctx.extra_buffers, ctx.extra_origin


def _result_node(result, kind, name, fn):
    from ._rows import RowProxy

    if isinstance(result, BufferProxy):  # not indexed (or not fully): say so as for the operations on it
        if result.ndim != 1:
            result._whole()
        result = result._row()
    if isinstance(result, RowProxy):
        raise TraceError(f"{kind} '{name}' returned a row of {len(result)} values of {result.what} (indexed in all but "
                         "its last dimension): index it fully, e.g. bias[h, q_idx], or reduce it, e.g. .sum()", name)
    if result is None or isinstance(result, (tuple, list)):
        what = "None" if result is None else type(result).__name__
        raise TraceError(f"{kind} '{name}' returned {what}; it must return one value", name)
    node = as_node(result)
    if node is None:
        raise TraceError(f"{kind} '{name}' returned a {type(result).__name__}; it must return a number or a "
                         "traced value", name)
    if kind == "mask_mod" and node.type != "bool":
        raise TraceError(f"mask_mod '{name}' must return a bool (True = attend), it returns {_ir.type_str(node)}; "
                         "compare it, e.g. `x != 0`", name)
    if kind == "score_mod" and node.type != "f32":
        node = _ir.cast(node, "f32")
    return node


def trace(fn, kind=None) -> TracedMod:
    """Traces `fn` (or finds it in the cache) and binds its current captured values.

    kind: 'score_mod' / 'mask_mod', or None to decide by the number of positional parameters.
    Raises TraceError (data-dependent control flow, unsupported operations, type errors) naming the
    mod and the line, and TypeError for a mod with the wrong number of parameters.
    """
    fn = mod_callable(fn)
    detected = mod_kind(fn)
    if detected is None:
        if kind is None:
            raise TypeError(f"flexattn: cannot tell whether {mod_name(fn)!r} is a score_mod or a mask_mod from its "
                            "signature (it takes *args): pass kind='score_mod' or kind='mask_mod'")
        detected = kind
    if kind is not None and kind != detected:
        raise TypeError(f"flexattn: expected a {kind}, got {detected} {mod_name(fn)!r}")
    name = mod_name(fn)
    key, leaves, refs, _ = walk(fn)
    key = (detected,) + key
    entries = None
    volatile = _capture.volatile(key, refs)  # numbers read through objects: not in the key
    if volatile and _self_reads.eligible(fn, key, refs):
        return _trace_recording_self(fn, detected, name, key, refs, leaves)
    if not volatile:
        with _lock:
            entries = _cache.get(key)
            if entries is not None:
                _cache.move_to_end(key)
    if entries:
        scalars = _scalar_values(leaves, entries[0])
        for entry in entries:
            if entry.alive() and entry.guards_hold(scalars):
                stats["hits"] += 1
                return TracedMod(entry, leaves, {}, cached=True)
    stats["misses"] += 1
    stats["traces"] += 1
    entry, traced_leaves, extra, origins = _run(fn, detected, name, key, refs)
    if not extra and not volatile:  # tensors bound by identity cannot be re-bound from a later walk: not cached
        _store(key, entry)
    return TracedMod(entry, traced_leaves, extra, cached=False, extra_origins=origins)


def _scalar_values(leaves, entry):
    """{scalar name: current value} of a walk's leaves, named as in a cached entry of the same key."""
    return {name: leaf.python_value() for leaf, name in zip(leaves, entry.leaf_names) if leaf.kind == "scalar"}


def _store(key, entry):
    """Caches entry under key: the newest _ENTRIES_PER_KEY live ones per key, _CACHE_SIZE keys (least recent out)."""
    with _lock:
        held = _cache.setdefault(key, [])
        held[:] = [e for e in held if e.alive()][-(_ENTRIES_PER_KEY - 1):] + [entry]
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)


def _trace_recording_self(fn, kind, name, key, refs, leaves):
    """trace() of a bound method whose only volatile capture is `self`: a cached trace is reused when every read the
    trace made through `self` gives the same result again (_self_reads); a new trace runs with `self` recorded, and
    is cached only when its log is complete. An object whose traces could not be recorded, or whose reads keep
    changing (more misses in a row than entries kept), goes back to the plain trace on every call."""
    obj = fn.__self__
    key = key + (("self reads",),)
    with _lock:
        entries = list(_cache.get(key, ()))
        if entries:
            _cache.move_to_end(key)
    if entries:
        scalars = _scalar_values(leaves, entries[0])
        memo = {}
        for entry in reversed(entries):  # the newest first: a hit moves its entry to the end
            if entry.alive() and _self_reads.matches(entry.self_reads, obj, memo) and entry.guards_hold(scalars):
                stats["hits"] += 1
                entry.after_miss = False
                with _lock:
                    held = _cache.get(key)
                    if held and held[-1] is not entry and entry in held:
                        held.remove(entry)
                        held.append(entry)
                return TracedMod(entry, leaves, {}, cached=True)
        if len(entries) >= _ENTRIES_PER_KEY and entries[-1].after_miss:
            _self_reads.remember_unrecordable(fn)  # a value that changes every call (a step counter): plain path
    stats["misses"] += 1
    stats["traces"] += 1
    stand_in, log = _self_reads.recorder(obj)
    try:
        entry, traced_leaves, extra, origins = _run(types.MethodType(fn.__func__, stand_in), kind, name, key, refs)
        failed = False
    except Exception:  # noqa: BLE001 - an assignment, or whatever the stand-in changed: the plain trace decides
        log.complete, failed = False, True
    if not log.complete or extra:
        # Not cached. The recorded trace is the mod's own (the stand-in answers every read with the real value, and
        # code that could tell them apart is not recorded), so only a failed one is traced again.
        _self_reads.remember_unrecordable(fn)
        if failed:
            entry, traced_leaves, extra, origins = _run(fn, kind, name, key, refs)
    else:
        entry.self_reads = tuple(log.reads)
        entry.refs += _self_reads.weak_anchors(log)
        entry.after_miss = bool(entries)  # made after the key's cached traces all missed
        _store(key, entry)
    return TracedMod(entry, traced_leaves, extra, cached=False, extra_origins=origins)


def entry_cached(key, entry) -> bool:
    """Whether `entry` is one of the cached traces of the (kind,) + walk key `key`."""
    with _lock:
        return any(e is entry for e in _cache.get(key, ()))


def clear_cache():
    global generation
    with _lock:
        _cache.clear()
        generation += 1
    for k in stats:
        stats[k] = 0
