"""Proxy: a traced 0-d value. Python operators, numpy ufuncs and torch functions applied to proxies build
IR nodes instead of computing; BufferProxy stands for a captured tensor until it is indexed."""
from __future__ import annotations

import numpy as np

from . import _ir
from ._arrays import buffer_dtype as _buffer_dtype
from ._arrays import is_array_like, is_torch_tensor, scalar_type, torch_module
from ._context import TraceAttributeError, current, fail
from ._ir import IRTypeError

DTYPE_OF_TYPE = {"bool": "bool", "i32": "int32", "i64": "int64", "f32": "float32"}  # IR value type -> dtype name

_CONTROL_FLOW = ("flexattn traces the mod once for all positions, so a traced value has no Python truth "
                 "value (if/while, and/or/not, chained comparisons like a < b < c, min()/max()): use "
                 "torch.where(c, x, y) or flexattn.ops.where, and & | ~ instead of and/or/not")


def as_node(x):
    """The IR node for an operand, or None if x cannot be one."""
    if isinstance(x, Proxy):
        return x.node
    if isinstance(x, (bool, int, float)):
        return _ir.python_literal(x)
    if isinstance(x, np.generic) and x.dtype.kind in "biuf":
        return _ir.python_literal(x.item())
    if isinstance(x, BufferProxy):
        fail(f"captured tensor '{x.name}' used without indexing",
             f"index every dimension with traced indices first, e.g. {x.name}[h, q_idx]")
    if is_array_like(x):
        if len(x.shape) == 0:
            ctx = current()
            if ctx is not None and is_torch_tensor(x) and id(x) not in ctx.made:
                from ._dispatch import outside_scalar

                return outside_scalar(x).node
            return _ir.literal(x.item(), scalar_type(x.dtype), False)  # made inside the mod: a strong constant
        fail(f"a tensor of shape {tuple(x.shape)} combined with a traced value",
             "mods compute one score at a time: index captured tensors with traced indices instead")
    return None


def node_of(x):
    n = as_node(x)
    if n is None:
        fail("unsupported operand", f"cannot combine a traced value with a {type(x).__name__}")
    return n


def build(fn, *args):
    """Runs an IR builder on operand nodes; a type error becomes a TraceError naming the mod and line."""
    try:
        return Proxy(fn(*[node_of(a) for a in args]))
    except IRTypeError as e:
        fail("type error", str(e))


def _concrete(p, kind: str):
    """Python value of a proxy that depends only on captured scalars (the trace specialises on it and the
    cache re-checks the value on every call); data-dependent values raise."""
    ctx = current()
    if ctx is not None and _ir.depends_only_on_scalars(p.node):
        from ._eval import evaluate

        v = evaluate(p.node, {"scalars": ctx.scalar_values}).item()
        ctx.guards.append((p.node, v))
        return v
    if kind == "bool":
        fail("data-dependent control flow", _CONTROL_FLOW)
    fail(f"a traced value used as a Python {kind}",
         "it differs per position: use torch.*/flexattn.ops.* functions instead of math.*, and index only "
         "captured tensors (a numpy array must be captured directly: closure variable, global or default "
         "argument) with traced indices")


def _binop(name, reverse=False):
    def f(self, other):
        from ._dispatch import HANDLERS
        from ._rows import is_row

        if is_row(other) or as_node(other) is None:  # a row's own operation (_rows.py) comes next
            return NotImplemented
        return HANDLERS[name](other, self) if reverse else HANDLERS[name](self, other)

    f.__name__ = f"__{'r' if reverse else ''}{name}__"
    return f


class Proxy:
    __slots__ = ("node",)

    def __init__(self, node):
        self.node = node

    def __repr__(self):
        from ._print import print_text

        return f"<flexattn traced {self.node.type}: {print_text(self.node)}>"

    __hash__ = object.__hash__

    def __bool__(self):
        return bool(_concrete(self, "bool"))

    def __index__(self):
        if self.node.type not in ("i32", "i64", "bool"):
            fail("a traced float used as an index", "cast it first, e.g. x.long()")
        return int(_concrete(self, "int"))

    def __int__(self):
        return int(_concrete(self, "int"))

    def __float__(self):
        return float(_concrete(self, "float"))

    def __array__(self, dtype=None, copy=None):
        # numpy converts index objects with __array__ (and swallows errors from __index__)
        return np.asarray(_concrete(self, "number (converted to a numpy array)"), dtype=dtype)

    def __len__(self):
        fail("len() of a traced value", "mod values are 0-d")

    def __iter__(self):
        fail("iteration over a traced value", "mod values are 0-d")

    def __getitem__(self, index):
        fail("indexing a traced value", "only captured tensors can be indexed (with traced indices)")

    def __setitem__(self, index, value):
        fail("in-place mutation inside a mod", "mods must be pure functions")

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        from ._dispatch import method

        m = method(name)
        if m is not None:
            return lambda *args, **kwargs: m(self, *args, **kwargs)
        fail(f"unsupported operation '.{name}()' on a traced value",
             "see flexattn.ops for the operations a mod may use", cls=TraceAttributeError)

    # tensor-like metadata, for mods that inspect it
    @property
    def dtype(self):
        name = DTYPE_OF_TYPE[self.node.type]
        torch = torch_module()
        return getattr(torch, name) if torch is not None else np.dtype(name)

    shape = property(lambda self: () if torch_module() is None else torch_module().Size([]))
    device = property(lambda self: "cpu" if torch_module() is None else torch_module().device("cpu"))
    ndim = 0
    requires_grad = False

    def dim(self):
        return 0

    def size(self, dim=None):
        if dim is not None:
            fail("size(dim) of a traced value", "mod values are 0-d")
        return self.shape

    def numel(self):
        return 1

    def is_floating_point(self):
        return self.node.type == "f32"

    def item(self):
        return self if _ir.depends_only_on_scalars(self.node) else _concrete(self, "number (.item())")

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        from ._dispatch import dispatch_torch

        return dispatch_torch(func, args, kwargs or {})

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from ._dispatch import dispatch_numpy

        if method != "__call__" or kwargs:
            fail(f"numpy {ufunc.__name__}.{method} with {sorted(kwargs)} on a traced value")
        return dispatch_numpy(ufunc.__name__, inputs, {})

    def __array_function__(self, func, types, args, kwargs):
        from ._dispatch import dispatch_numpy

        return dispatch_numpy(func.__name__, args, kwargs)


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor", "lshift", "rshift"):
    setattr(Proxy, f"__{_name}__", _binop(_name))
    setattr(Proxy, f"__r{_name}__", _binop(_name, reverse=True))
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(Proxy, f"__{_name}__", _binop(_name))
Proxy.__neg__ = lambda self: build(lambda a: _ir.unary("neg", a), self)
Proxy.__pos__ = lambda self: self
Proxy.__abs__ = lambda self: build(lambda a: _ir.unary("abs", a), self)
Proxy.__round__ = lambda self, ndigits=None: _handler("round")(self) if ndigits is None else _handler("round")(
    self, decimals=ndigits)
Proxy.__invert__ = lambda self: _handler("bitwise_not")(self)


def _handler(name):
    from ._dispatch import HANDLERS

    return HANDLERS[name]


class _Free(tuple):
    """A dimension of a captured tensor not yet indexed: its entries start + step * i for i < length."""
    __slots__ = ()

    def __new__(cls, start, step, length):
        return tuple.__new__(cls, (start, step, length))

    start = property(lambda self: self[0])
    step = property(lambda self: self[1])
    length = property(lambda self: self[2])


class BufferProxy:
    """A captured tensor or array during tracing. Indexing every dimension with integers or traced
    values gives a Proxy of a Load; indexing fewer dimensions gives a BufferProxy with those indices
    fixed (so `bias[h][q_idx]` works). Elementwise operations of the whole tensor with numbers or mod
    values (`(slopes * 2)[h]`, `bias.exp()[h, q_idx]`, a cast) are kept in `post` and applied to each load."""

    def __init__(self, name, obj, dims=None, post=(), detached=False):
        self.name, self.obj, self.post = name, obj, tuple(post)
        self.detached = detached  # w.detach(): its loads carry no gradient to the buffer
        try:
            self.buffer_dtype = _buffer_dtype(obj.dtype)
        except TypeError as e:
            fail(f"captured tensor '{name}'", str(e))
        self.full_shape = tuple(int(s) for s in obj.shape)
        # per dimension of the captured tensor: an index node (fixed by an earlier index), or a _Free view of it
        # (what a slice left: entries start + step * i for i < length)
        self.dims = tuple(dims) if dims is not None else tuple(_Free(0, 1, n) for n in self.full_shape)

    def __repr__(self):
        return f"<flexattn captured buffer '{self.name}' {self.buffer_dtype}{list(self.full_shape)}>"

    @property
    def shape(self):
        s = tuple(d.length for d in self.dims if type(d) is _Free)
        torch = torch_module()
        return torch.Size(s) if torch is not None and type(self.obj).__module__.startswith("torch") else s

    @property
    def dtype(self):
        if not self.post:
            return self.obj.dtype
        name = DTYPE_OF_TYPE[self._element_type()]
        torch = torch_module()
        return getattr(torch, name) if torch is not None and is_torch_tensor(self.obj) else np.dtype(name)

    @property
    def ndim(self):
        return sum(1 for d in self.dims if type(d) is _Free)

    @property
    def device(self):
        return getattr(self.obj, "device", "cpu")

    def is_floating_point(self):
        return self._element_type() == "f32"

    def _element_type(self):
        """The IR type of an element after `post` (built on a stand-in leaf: nothing is loaded)."""
        p = Proxy(_ir.literal(0, _ir.load_type(self.buffer_dtype), False))
        for fn in self.post:
            p = fn(p)
        return p.node.type if isinstance(p, Proxy) else _ir.python_literal(p).type

    def _then(self, fn):
        """This tensor with fn (Proxy -> value) applied to every element it yields."""
        return BufferProxy(self.name, self.obj, self.dims, self.post + (fn,), self.detached)

    def dim(self):
        return self.ndim

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def __len__(self):
        return self.shape[0]

    def numel(self):
        return int(np.prod(self.shape))

    def _cast(self, dtype):
        return self._then(lambda p: _handler("to")(p, dtype))

    def detach(self):
        if self.post:
            fail(f"detach() after an operation on captured tensor '{self.name}'", f"detach first: {self.name}.detach()")
        return BufferProxy(self.name, self.obj, self.dims, self.post, detached=True)

    def to(self, *args, **kwargs):
        from ._dispatch import find_dtype

        dt = find_dtype(args, kwargs)
        return self if dt is None else self._cast(dt)

    float = lambda self: self._cast("float32")  # noqa: E731
    double = lambda self: self._cast("float64")  # noqa: E731
    int = lambda self: self._cast("int32")  # noqa: E731
    long = lambda self: self._cast("int64")  # noqa: E731
    bool = lambda self: self._cast("bool")  # noqa: E731

    def __getitem__(self, index):
        items = list(index) if isinstance(index, tuple) else [index]
        free = [k for k, d in enumerate(self.dims) if type(d) is _Free]
        ellipses = [i for i, ix in enumerate(items) if ix is Ellipsis]
        if len(ellipses) > 1:
            fail(f"an index with two ... into captured tensor '{self.name}'")
        if ellipses:
            at = ellipses[0]
            items[at:at + 1] = [slice(None)] * max(0, len(free) - (len(items) - 1))
        if len(items) > len(free):
            fail(f"too many indices for captured tensor '{self.name}'",
                 f"it has {len(free)} dimensions left, got {len(items)} indices")
        dims = list(self.dims)
        for ix, k in zip(items, free):
            dims[k] = self._index(ix, dims[k], self.full_shape[k])
        if any(type(d) is _Free for d in dims):
            return BufferProxy(self.name, self.obj, dims, self.post, self.detached)
        if len(dims) > 4:
            fail(f"captured tensor '{self.name}' has {len(dims)} dimensions",
                 "captured buffers may have 1 to 4 dimensions")
        try:
            p = Proxy(_ir.load(self.name, self.buffer_dtype, dims))
            if self.detached:
                p = Proxy(_ir.unary("detach", p.node))
        except IRTypeError as e:
            fail("type error", str(e))
        for fn in self.post:
            p = fn(p)
        return p

    def _index(self, ix, d, full):
        """Dimension view d indexed by ix: a narrower _Free view for a slice (Python int bounds, step > 0), else the
        index node into the whole dimension. Inside a slice's view the index is first clamped to the view, as flexattn
        clamps every index (an index past it reads its nearest entry, where torch's eager path raises IndexError)."""
        if isinstance(ix, slice):
            if any(v is not None and (isinstance(v, bool) or not isinstance(v, int))
                   for v in (ix.start, ix.stop, ix.step)):
                fail(f"slice {ix!r} of captured tensor '{self.name}'", "slice bounds must be Python ints")
            if ix.step is not None and ix.step <= 0:
                fail(f"slice {ix!r} of captured tensor '{self.name}'", "the step must be positive (as in torch)")
            start, stop, step = ix.indices(d.length)
            length = len(range(start, stop, step))
            if length == 0:
                fail(f"slice {ix!r} of captured tensor '{self.name}' is empty")
            return _Free(d.start + d.step * start, d.step * step, length)
        n = as_node(ix) if not isinstance(ix, (type(None), list)) else None
        if n is None:
            fail(f"unsupported index {ix!r} into captured tensor '{self.name}'",
                 "index every dimension with an integer or a traced integer value, or slice it with Python ints "
                 "(no None or lists)")
        if d == (0, 1, full):  # the whole dimension: the load's own clamp
            return n
        if type(ix) is int:  # a Python int: counted from the view's end when negative, as in torch
            i = min(max(ix + d.length if ix < 0 else ix, 0), d.length - 1)
            return as_node(d.start + d.step * i)
        p = _handler("clamp")(Proxy(n), 0, d.length - 1)
        if d.step != 1:
            p = p * d.step
        if d.start:
            p = p + d.start
        return as_node(p)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        from ._dispatch import dispatch_torch

        kwargs = kwargs or {}
        if _elementwise_of_one(getattr(func, "__name__", ""), args, kwargs) is None:  # else deferred (call_handler)
            _whole_unless_rows(getattr(func, "__name__", func), args)
        return dispatch_torch(func, args, kwargs)

    def __bool__(self):
        if self.ndim == 1:
            return bool(self._row())  # the row's message
        fail(f"captured tensor '{self.name}' used as a Python bool")

    def _whole(self, *args, **kwargs):
        fail(f"captured tensor '{self.name}' used without indexing",
             f"index every dimension with traced indices first, e.g. {self.name}[h, q_idx]")

    # numpy would otherwise convert it element by element through __len__/__getitem__
    __iter__ = __array__ = _whole

    def __array_function__(self, func, types, args, kwargs):
        from ._dispatch import dispatch_numpy, numpy_name

        if _elementwise_of_one(numpy_name(func.__name__), args, kwargs) is None:
            _whole_unless_rows(func.__name__, args)
        return dispatch_numpy(func.__name__, args, kwargs)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__" or kwargs:
            self._whole()
        from ._dispatch import dispatch_numpy, numpy_name

        if _elementwise_of_one(numpy_name(ufunc.__name__), inputs, {}) is None:
            _whole_unless_rows(ufunc.__name__, inputs)
        return dispatch_numpy(ufunc.__name__, inputs, {})

    def __neg__(self):
        return self._then(lambda p: -p)

    def __abs__(self):
        return self._then(abs)

    def __invert__(self):
        return self._then(lambda p: ~p)

    def _elementwise_method(self, name, args, kwargs):
        if any(_holds_tensor(a) for a in list(args) + list(kwargs.values())):
            if self.ndim == 1:
                return getattr(self._row(), name)(*args, **kwargs)
            self._whole()
        from ._dispatch import method

        m = method(name)
        if m is None:
            fail(f"unsupported operation '.{name}' on captured tensor '{self.name}'", cls=TraceAttributeError)
        return self._then(lambda p: m(p, *args, **kwargs))

    def _row(self):
        """This captured tensor as a row (one dimension left; _rows.py), or the error of a whole tensor."""
        from ._rows import as_row

        r = as_row(self)
        if r is None:
            self._whole()
        return r

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if name in ELEMENTWISE:
            return lambda *args, **kwargs: self._elementwise_method(name, args, kwargs)
        if self.ndim == 1:  # a row: its methods (RowProxy's own, or torch functions as methods)
            return getattr(self._row(), name)
        fail(f"unsupported operation '.{name}' on captured tensor '{self.name}'",
             f"index it with traced indices first, e.g. {self.name}[h, q_idx]", cls=TraceAttributeError)


# Functions and methods that act on each element: on a captured tensor with numbers or mod values as the other
# operands they are deferred to its loads (BufferProxy.post). Casts (.float(), .to) go the same way.
ELEMENTWISE = frozenset((
    "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos", "tan", "erf", "abs", "neg",
    "negative", "absolute", "floor", "ceil", "round", "trunc", "sign", "relu", "relu6", "hardtanh", "silu", "softplus",
    "gelu", "log1p", "reciprocal", "square", "clamp", "clamp_min", "clamp_max", "clip", "nan_to_num", "add", "sub",
    "mul", "div", "true_divide", "pow", "remainder", "floor_divide", "minimum", "maximum", "isnan", "isinf",
    "isfinite", "logical_not", "bitwise_not", "to", "type", "float", "double", "int", "long", "bool", "half",
    "bfloat16"))


def _holds_tensor(x):
    from ._rows import RowProxy

    if isinstance(x, (BufferProxy, RowProxy)) or (is_array_like(x) and len(getattr(x, "shape", ())) > 0):
        return True
    return isinstance(x, (list, tuple)) and any(_holds_tensor(y) for y in x)


def _elementwise_of_one(name, args, kwargs):
    """The captured tensor of an elementwise function whose other operands are numbers or mod values, else None."""
    if name not in ELEMENTWISE:
        return None
    buffers = [a for a in list(args) + list(kwargs.values()) if isinstance(a, BufferProxy)]
    if len(buffers) != 1 or any(_holds_tensor(a) for a in list(args) + list(kwargs.values()) if a is not buffers[0]):
        return None
    return buffers[0]


def _swap(args, old, new):
    if isinstance(args, dict):
        return {k: new if v is old else v for k, v in args.items()}
    return tuple(new if a is old else a for a in args)


def _whole_unless_rows(fname, args):
    """Refuses a function of a captured tensor with more than one dimension left; rows (one left) go on to the
    dispatchers, which hand them to _rows.py."""
    whole = next((a for a in args if isinstance(a, BufferProxy) and a.ndim != 1), None)
    if whole is not None:
        fail(f"{fname} applied to a whole captured tensor '{whole.name}'",
             f"index it with traced indices first, e.g. {whole.name}[h, q_idx]")


def _row_op(op, reverse=False):
    import operator

    fn = getattr(operator, op + "_" if op in ("and", "or") else op)

    def f(self, other):
        if not _holds_tensor(other) and as_node(other) is not None:  # a number or a mod value: per element
            return self._then((lambda p: fn(other, p)) if reverse else (lambda p: fn(p, other)))
        return self._row()._zip(other, op, reverse)
    return f


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor", "lshift", "rshift", "eq",
              "ne", "lt", "le", "gt", "ge"):
    setattr(BufferProxy, f"__{_name}__", _row_op(_name))
    setattr(BufferProxy, f"__r{_name}__", _row_op(_name, reverse=True))
BufferProxy.__matmul__ = lambda self, other: self._row() @ other
BufferProxy.__rmatmul__ = lambda self, other: other @ self._row()
BufferProxy.__hash__ = object.__hash__
