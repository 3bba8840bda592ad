"""Rows of captured tensors inside mods. A captured tensor indexed in every dimension but its last (a row, e.g.
`topk[b, h, q_tile]` or `rope_q[b, h, q_idx]`) and elementwise combinations of rows with each other and with mod
values are vectors of the row's length, unrolled into the IR one element per load; their reductions (sum, any,
all, amax, amin, mean, dot) are mod values again. What attention-gym's top-k (VSA) mask and latent-attention
rope score need: `(topk[b, h, t] == kv_tile.unsqueeze(-1)).any(dim=-1)`, `torch.dot(rq[b, h, q], rk[b, h, kv])`.
A row of n elements costs n loads (and n operations per use) for every score entry: meant for short rows."""
from __future__ import annotations

from ._context import fail

MAX_ROW = 256  # elements unrolled per row: beyond, the per-entry cost is no longer a mod's

_ELEMENTWISE = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor", "lshift", "rshift",
                "eq", "ne", "lt", "le", "gt", "ge")


def _handlers():
    from ._dispatch import HANDLERS

    return HANDLERS


def is_row(x):
    from ._proxy import BufferProxy

    return isinstance(x, RowProxy) or (isinstance(x, BufferProxy) and x.ndim == 1)


class RowProxy:
    """A vector of mod values (Proxy objects) of a fixed length."""

    def __init__(self, items, what):
        self.items, self.what = list(items), what

    def __repr__(self):
        return f"<flexattn row of {len(self.items)} from {self.what}>"

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        if not isinstance(i, int):
            fail(f"row of {self.what} indexed with {i!r}", "index a row with a Python int, or reduce it")
        return self.items[i]

    def __pos__(self):
        return self

    @property
    def shape(self):
        return (len(self.items),)

    def dim(self):
        return 1

    def _zip(self, other, op, reverse=False, fn=False):
        """Elementwise `op` (a dunder name, or with fn a HANDLERS function name) with a row or a mod value."""
        h = _handlers()[op if fn else f"__{op}__"]
        row = as_row(other)
        other = other if row is None else row
        if isinstance(other, RowProxy):
            if len(other) != len(self):
                fail(f"rows of {len(self)} and {len(other)} elements combined elementwise",
                     f"{self.what} and {other.what} must have the same length")
            pairs = zip(self.items, other.items)
        else:
            pairs = ((x, other) for x in self.items)
        return RowProxy([h(b, a) if reverse else h(a, b) for a, b in pairs], self.what)

    def _map(self, name):
        return RowProxy([_handlers()[name](x) for x in self.items], self.what)

    def __neg__(self):
        return self._map("__neg__")

    def __abs__(self):
        return self._map("__abs__")

    def __invert__(self):
        return self._map("__invert__")

    def __bool__(self):
        fail(f"a row of {self.what} used as a Python bool", "reduce it first, e.g. .any() or .all()")

    # ---- reductions: a balanced tree, so a long row stays shallow; torch's result types ----
    def _reduce(self, name, dim, keepdim=False, empty=None):
        if dim not in (None, -1, 0):
            fail(f"reduction over dim={dim!r} of a row of {self.what}", "a row has one dimension: dim=-1 (or 0)")
        if keepdim:
            fail(f"keepdim=True in a reduction of a row of {self.what}", "a mod value is 0-d: leave keepdim off")
        if not self.items:
            if empty is None:
                fail(f"{name.strip('_')} of an empty row of {self.what}", "torch refuses it too")
            return empty
        h = _handlers()[name]
        items = list(self.items)
        while len(items) > 1:
            items = [h(items[i], items[i + 1]) if i + 1 < len(items) else items[i] for i in range(0, len(items), 2)]
        return items[0]

    def _type(self):
        return self.items[0].node.type if self.items else "f32"

    def _as_bool(self):
        return RowProxy([x if x.node.type == "bool" else _handlers()["__ne__"](x, 0) for x in self.items], self.what)

    def _cast_items(self, dtype):
        return self if dtype is None else RowProxy([x.to(dtype) for x in self.items], self.what)

    def sum(self, dim=None, keepdim=False, dtype=None):
        row = self._cast_items(dtype)
        if dtype is None and row._type() != "f32":  # torch sums bools and integers in int64
            row = row._cast_items("int64")
        return row._reduce("__add__", dim, keepdim, empty=0.0 if row._type() == "f32" else 0)

    def mean(self, dim=None, keepdim=False, dtype=None):
        row = self._cast_items(dtype)
        if row._type() != "f32":
            fail(f"mean of a row of {self.what} ({row._type()})", "torch refuses mean on integers and bools: cast "
                 "it first, e.g. .float().mean() or mean(dtype=torch.float32)")
        return _handlers()["__truediv__"](row.sum(dim, keepdim), float(len(row)))

    def any(self, dim=None, keepdim=False):
        return self._as_bool()._reduce("__or__", dim, keepdim, empty=False)

    def all(self, dim=None, keepdim=False):
        return self._as_bool()._reduce("__and__", dim, keepdim, empty=True)

    def amax(self, dim=None, keepdim=False):
        return self._reduce("maximum", dim, keepdim)

    def amin(self, dim=None, keepdim=False):
        return self._reduce("minimum", dim, keepdim)

    def _extreme(self, which, other, keepdim):
        """max / min: of the row (no dim), elementwise with `other` (torch.max(input, other)); a dim is refused."""
        if other is None:
            return self._reduce("maximum" if which == "max" else "minimum", None, keepdim)
        if not isinstance(other, int):
            return self._zip(other, "maximum" if which == "max" else "minimum", fn=True)
        fail(f".{which}(dim={other!r}) of a row of {self.what}", f"it returns values and indices; use .a{which}(dim) "
             "for the values")

    def max(self, dim=None, keepdim=False):
        return self._extreme("max", dim, keepdim)

    def min(self, dim=None, keepdim=False):
        return self._extreme("min", dim, keepdim)

    def unsqueeze(self, dim):
        fail(f".unsqueeze on a row of {self.what}", "rows stay one-dimensional inside mods; unsqueeze the mod value "
             "it is compared with instead, e.g. (row == x.unsqueeze(-1)).any(-1)")

    def to(self, *args, **kwargs):
        return RowProxy([x.to(*args, **kwargs) for x in self.items], self.what)

    def float(self):
        return self._map("float")

    def int(self):
        return self._map("int")

    def long(self):
        return self._map("long")

    def __matmul__(self, other):  # row @ row: torch.dot
        return row_function("dot", (self, other), {})

    def __rmatmul__(self, other):
        return row_function("dot", (other, self), {})

    def __getattr__(self, name):
        """Tensor methods torch has as functions too (row.abs(), row.exp(), row.clamp(min=0)): the function."""
        if name.startswith("_") or name not in _handlers():
            raise AttributeError(f"flexattn: a row of {self.what} has no method {name!r} (rows support elementwise "
                                 "operations, sum, mean, any, all, amax, amin and dot)")
        return lambda *args, **kwargs: row_function(name, (self,) + args, kwargs)

    # torch and numpy functions go through the dispatchers, which hand rows to row_function below.
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        from ._dispatch import dispatch_torch

        return dispatch_torch(func, args, kwargs or {})

    def __array_function__(self, func, types, args, kwargs):
        from ._dispatch import dispatch_numpy

        return dispatch_numpy(func.__name__, args, kwargs)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__" or kwargs:
            fail(f"numpy {ufunc.__name__}.{method} on a row of {self.what}")
        from ._dispatch import dispatch_numpy

        return dispatch_numpy(ufunc.__name__, inputs, {})


for _op in _ELEMENTWISE:
    setattr(RowProxy, f"__{_op}__", (lambda op: lambda self, other: self._zip(other, op))(_op))
    setattr(RowProxy, f"__r{_op}__", (lambda op: lambda self, other: self._zip(other, op, reverse=True))(_op))
RowProxy.__hash__ = object.__hash__


def as_row(x):
    """x as a RowProxy when it is a row (or a captured tensor with one dimension left), else None."""
    from ._proxy import BufferProxy

    if isinstance(x, RowProxy):
        return x
    if isinstance(x, BufferProxy) and x.ndim == 1:
        n = x.shape[0]
        if n > MAX_ROW:
            fail(f"a row of {n} elements of captured tensor '{x.name}' (indexed in all but its last dimension)",
                 f"index it fully, e.g. {x.name}[h, q_idx]; rows that a mod combines or reduces are unrolled into "
                 f"it, one load per element, up to {MAX_ROW}")
        return RowProxy([x[i] for i in range(n)], f"captured tensor '{x.name}'")
    return None


_REDUCTIONS = ("sum", "mean", "any", "all", "amax", "amin", "max", "min")


def row_function(name, args, kwargs):
    """A function (its HANDLERS name, from _dispatch.call_handler) with a row among its operands: reductions, dot,
    and the elementwise functions of HANDLERS."""
    kwargs = dict(kwargs)
    if "input" in kwargs:  # torch.sum(input=row)
        args = (kwargs.pop("input"),) + tuple(args)
    if name == "unsqueeze":
        return as_row(args[0]).unsqueeze(args[1] if len(args) > 1 else kwargs.get("dim"))
    rows = [as_row(a) for a in args]
    if name in ("dot", "inner", "vdot") and len(args) == 2 and all(r is not None for r in rows):
        return (rows[0] * rows[1]).sum()
    if name in _REDUCTIONS and args and rows[0] is not None:
        dim = kwargs.get("dim", kwargs.get("axis", args[1] if len(args) > 1 else None))
        return getattr(rows[0], name)(dim)
    h = _handlers().get(name)
    if h is not None and any(r is not None for r in rows):
        n = {len(r) for r in rows if r is not None}
        if len(n) > 1:
            fail(f"{name} of rows of different lengths {sorted(n)}")
        return RowProxy([h(*[r.items[i] if r is not None else a for r, a in zip(rows, args)], **kwargs)
                         for i in range(n.pop())], next(r.what for r in rows if r is not None))
    fail(f"{name} applied to a row", "rows support elementwise operations, sum, mean, any, all, amax, amin and dot")
