"""What each torch function / numpy ufunc / Tensor method means on traced values, with torch semantics.

One table (HANDLERS, by name) serves torch's __torch_function__ protocol, numpy's __array_ufunc__ and
__array_function__, Tensor-style methods on proxies and the public flexattn.ops functions.
"""
from __future__ import annotations

import math

import numpy as np

from . import _ir
from ._arrays import CAST_TYPE, dtype_name, is_torch_tensor, torch_module
from ._context import current, fail
from ._ir import IRTypeError
from ._proxy import DTYPE_OF_TYPE, BufferProxy, Proxy, _concrete, as_node, build, node_of

_DTYPE_NAMES = {"bool", "int8", "uint8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"}


# ---- node-level operations with torch semantics ------------------------------------------------------
def _is_bool(n):
    return n.type == "bool"


def _is_lit(n, value):
    return n.op == "literal" and n.type == "bool" and bool(n.value) == value


def n_add(a, b):
    return _ir.binary("or" if _is_bool(a) and _is_bool(b) else "add", a, b)  # torch: True + True == True


def n_mul(a, b):
    return _ir.binary("and" if _is_bool(a) and _is_bool(b) else "mul", a, b)


def n_sub(a, b):
    if _is_bool(a) and _is_bool(b):
        raise IRTypeError("subtraction of two bools is not supported (torch refuses it too): use ^ or logical_xor()")
    return _ir.binary("sub", a, b)


def _int_operands(a, b, symbol):
    """True for torch's bitwise case (integers after promotion, a bool operand promoted); False for two bools."""
    if _is_bool(a) and _is_bool(b):
        return False
    t, _ = _ir.promote(a, b)
    if t not in ("i32", "i64"):
        raise IRTypeError(f"`{symbol}` on {_ir.type_str(a)} and {_ir.type_str(b)}: bitwise operations take integers "
                          "or bools (torch refuses floats too)")
    return True


def _logic(op, a, b, symbol):
    if _int_operands(a, b, symbol):
        return _ir.binary("bitwise_" + op, a, b)
    neutral = op == "and"  # True & x == x, False | x == x (and_masks / or_masks start from these)
    for x, y in ((a, b), (b, a)):
        if _is_lit(x, neutral) and (x.weak or not y.weak):
            return y
    return _ir.binary(op, a, b)


def n_and(a, b):
    return _logic("and", a, b, "&")


def n_or(a, b):
    return _logic("or", a, b, "|")


def n_xor(a, b):
    if _int_operands(a, b, "^"):  # (a | b) - (a & b): the bits set in exactly one
        return _ir.binary("sub", _ir.binary("bitwise_or", a, b), _ir.binary("bitwise_and", a, b))
    return _ir.binary("ne", a, b)


def n_not(a):
    if a.type in ("i32", "i64"):  # -a - 1 in two's complement
        return _ir.binary("sub", _ir.unary("neg", a), _ir.python_literal(1))
    if not _is_bool(a):
        raise IRTypeError(f"`~` on {_ir.type_str(a)}: bitwise not takes an integer or a bool (torch refuses floats too)")
    return _ir.unary("not", a)


def n_gelu(x, approximate="none"):
    """torch's gelu in the IR's nodes, in its own order of operations: x * 0.5 * (1 + erf(x * sqrt(1/2))), or with
    approximate='tanh' 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""
    if x.type != "f32":
        raise IRTypeError(f"gelu takes a float, got {_ir.type_str(x)} (torch refuses integers too)")
    lit, mul, add = _ir.python_literal, (lambda a, b: _ir.binary("mul", a, b)), (lambda a, b: _ir.binary("add", a, b))
    if approximate == "none":
        return mul(mul(x, lit(0.5)), add(lit(1.0), _ir.unary("erf", mul(x, lit(0.7071067811865476)))))
    if approximate == "tanh":
        inner = mul(lit(0.7978845608028654), add(x, mul(lit(0.044715), mul(mul(x, x), x))))
        return mul(mul(lit(0.5), x), add(lit(1.0), _ir.unary("tanh", inner)))
    raise IRTypeError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def n_shift(op, symbol):
    def f(a, b):
        _int_operands(a, b, symbol)
        return _ir.binary(op, a, b)
    return f


def n_where(c, a, b):
    if not _is_bool(c):
        raise IRTypeError(f"where: the condition must be bool, got {_ir.type_str(c)}")
    r = _ir.select(c, a, b)
    return _ir.cast(r, r.type) if r.weak else r  # torch.where returns a (strong) tensor even for two scalars


def n_trunc(x):
    if x.type != "f32":
        return x
    return _ir.select(_ir.binary("lt", x, _ir.python_literal(0)), _ir.unary("ceil", x), _ir.unary("floor", x))


def _exponent_negative(b):
    """Whether an exponent of Python numbers is negative: a literal's value, or the trace's guarded value of its
    sign (a change of sign retraces)."""
    if b.op == "literal":
        return b.value < 0
    return bool(_concrete(Proxy(_ir.binary("lt", b, _ir.python_literal(0))), "bool"))


def n_pow(a, b):
    """Integers to a negative power of a Python number: Python numbers give a float (`n ** -1` is 1/n), a tensor
    base is refused as torch refuses it; an exponent from a tensor keeps torch's integer power."""
    t, _ = _ir.promote(a, b)
    if t in ("i32", "i64") and _python_number(b) and _exponent_negative(b):
        if not _python_number(a):
            raise IRTypeError("integers to negative integer powers are not allowed (torch raises too): cast the "
                              "base to float first, e.g. q_idx.float() ** -1")
        return _ir.binary("pow", _ir.cast(a, "f32"), b)
    return _ir.binary("pow", a, b)


def n_div(a, b, rounding_mode=None):
    if rounding_mode is None:
        return _ir.binary("div", a, b)
    if rounding_mode == "floor":
        return _ir.binary("floordiv", a, b)
    if rounding_mode != "trunc":
        raise IRTypeError(f"div: rounding_mode must be None, 'floor' or 'trunc', got {rounding_mode!r}")
    t, _ = _ir.promote(a, b)
    if t == "f32":
        return n_trunc(_ir.binary("div", a, b))
    q, r = _ir.binary("floordiv", a, b), _ir.binary("mod", a, b)
    zero = _ir.python_literal(0)
    differ = _ir.binary("ne", _ir.binary("lt", a, zero), _ir.binary("lt", b, zero))
    fix = _ir.binary("and", _ir.binary("ne", r, zero), differ)
    return _ir.select(fix, _ir.binary("add", q, _ir.python_literal(1)), q)


def _python_number(n):
    """Whether n is made of Python numbers only (weak literals, scalars captured from numbers), not tensors."""
    ctx = current()
    names = ctx.python_numbers if ctx is not None else ()
    return all((m.op == "literal" and m.weak) or (m.op == "scalar" and m.name in names) or
               (m.op not in _ir.INPUTS and m.op not in ("literal", "scalar", "load")) for m in _ir.topo_order(n))


def _bound(x, b, at_bound, fold):
    """One side of clamp. torch passes the gradient of a float clamp by a number only strictly inside the bound (and
    relu's only for x > 0), but splits it at a tie with a tensor bound, as maximum / minimum do: where(x <= lo, lo, x)
    for a number (NaN stays NaN), the min / max node otherwise (and for integers, whose gradient is moot)."""
    if _python_number(b) and _ir.promote(x, b)[0] == "f32":
        return _ir.select(_ir.binary(at_bound, x, b), b, x)
    return _ir.binary(fold, x, b)


def n_clamp(x, lo=None, hi=None):
    if lo is None and hi is None:
        raise IRTypeError("clamp: at least one of min and max must be given")
    if lo is not None:
        x = _bound(x, lo, "le", "max")
    if hi is not None:
        x = _bound(x, hi, "ge", "min")  # hi wins when lo > hi, as in torch
    return x


def n_round(x):
    """torch.round: half to even. floor(x + 0.5) would round 0.49999997 up (the sum rounds to 1.0); x - floor(x) is
    exact in float32."""
    if x.type != "f32":
        return x
    r = _ir.unary("floor", x)
    d = _ir.binary("sub", x, r)
    half = _ir.python_literal(0.5)
    odd = _ir.binary("ne", _ir.binary("mod", r, _ir.python_literal(2.0)), _ir.python_literal(0.0))
    up = _ir.binary("or", _ir.binary("gt", d, half), _ir.binary("and", _ir.binary("eq", d, half), odd))
    return _ir.select(up, _ir.binary("add", r, _ir.python_literal(1.0)), r)


def n_log1p(x):
    # log(1 + x): float32 loses x below ~6e-8 next to 1 (an absolute error of that size, nothing in a softmax)
    return _ir.unary("log", _ir.binary("add", _ir.python_literal(1.0), x))


def n_softplus(x, beta=1.0, threshold=20.0):
    bx = _ir.binary("mul", x, _ir.python_literal(float(beta)))
    soft = _ir.binary("div", n_log1p(_ir.unary("exp", bx)), _ir.python_literal(float(beta)))
    return _ir.select(_ir.binary("gt", bx, _ir.python_literal(float(threshold))), _ir.cast(x, "f32"), soft)


def n_lerp(a, b, w):
    """torch's lerp: a + w (b - a) for |w| < 0.5, else b - (b - a)(1 - w) (exact at w = 1)."""
    diff = _ir.binary("sub", b, a)
    low = _ir.binary("add", a, _ir.binary("mul", w, diff))
    high = _ir.binary("sub", b, _ir.binary("mul", diff, _ir.binary("sub", _ir.python_literal(1.0), w)))
    return _ir.select(_ir.binary("lt", _ir.unary("abs", w), _ir.python_literal(0.5)), low, high)


def n_nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    if x.type != "f32":
        return x
    big = float(np.finfo(np.float32).max)
    inf = _ir.python_literal(math.inf)
    out = _ir.select(_ir.binary("eq", x, inf), _ir.python_literal(big if posinf is None else float(posinf)), x)
    out = _ir.select(_ir.binary("eq", x, _ir.unary("neg", inf)),
                     _ir.python_literal(-big if neginf is None else float(neginf)), out)
    return _ir.select(_ir.binary("ne", x, x), _ir.python_literal(float(nan)), out)


def n_cast(x, dtype):
    name = dtype_name(dtype)
    if name not in CAST_TYPE:
        raise IRTypeError(f"casts to {name} are not supported inside mods (the IR computes in bool, int32, int64 "
                          "and float32)")
    return _ir.cast(x, CAST_TYPE[name])


def n_sign(x):
    zero, one = _ir.python_literal(0), _ir.python_literal(1)
    s = _ir.select(_ir.binary("gt", x, zero), one, _ir.select(_ir.binary("lt", x, zero), _ir.python_literal(-1), zero))
    return _ir.cast(s, x.type)


INF = _ir.python_literal(math.inf)


# ---- argument helpers ---------------------------------------------------------------------------------
def find_dtype(args, kwargs):
    """The dtype named by .to()/.type()-style arguments (canonical name), or None (a device move)."""
    cands = ([kwargs["dtype"]] if kwargs.get("dtype") is not None else []) + list(args)
    for x in cands:
        if isinstance(x, Proxy):
            return DTYPE_OF_TYPE[x.node.type]
        if is_torch_tensor(x) or isinstance(x, np.ndarray):
            return dtype_name(x.dtype)
        if x in (bool, int, float) or (isinstance(x, type) and issubclass(x, np.generic)):
            return dtype_name(x)
        if isinstance(x, np.dtype) or type(x).__name__ == "dtype":
            return dtype_name(x)
        if isinstance(x, str) and dtype_name(x) in _DTYPE_NAMES:
            return dtype_name(x)
    return None


def _literal_of(value, dtype, like):
    """A strong constant like torch's new_ones / full_like: dtype given, else the dtype of `like`."""
    t = CAST_TYPE.get(dtype_name(dtype)) if dtype is not None else node_of(like).type
    if t is None:
        fail(f"a constant of dtype {dtype_name(dtype)} inside a mod", "use bool, int32, int64 or float32")
    if isinstance(value, Proxy):
        return build(lambda a: _ir.cast(a, t), value)
    return Proxy(_ir.literal(value, t, False))


def _check_0d(size, what):
    size = (size,) if isinstance(size, int) else tuple(size)
    if size != ():
        fail(f"{what} with size {size}", "values inside a mod are 0-d: use size ()")


def _new(fill):
    """Tensor.new_ones / new_zeros / new_empty (fill given) and new_full (fill=None: the argument)."""
    def f(self, size=(), *rest, dtype=None, fill_value=None, **kwargs):
        _check_0d(size, "Tensor.new_*")
        value = fill if fill is not None else (rest[0] if rest else fill_value)
        return _literal_of(value, dtype, self)
    return f


def _like(fill):
    """torch.zeros_like / ones_like / empty_like (fill given) and full_like (fill=None: the argument)."""
    def f(x, *rest, dtype=None, fill_value=None, **kwargs):
        value = fill if fill is not None else (rest[0] if rest else fill_value)
        return _literal_of(value, dtype, x)
    return f


def _clamp(x, min=None, max=None):
    if min is None and max is None:
        fail("clamp without min or max", "give at least one bound")
    bounds = [v for v in (min, max) if v is not None]

    def f(a, *b):
        return n_clamp(a, b[0] if min is not None else None, b[-1] if max is not None else None)
    return build(f, x, *bounds)


def _to(x, *args, **kwargs):
    dt = find_dtype(args, kwargs)
    return x if dt is None else build(lambda a: n_cast(a, dt), x)


def _tensor(data, *args, dtype=None, **kwargs):
    return build(lambda a: n_cast(a, dtype) if dtype is not None else a, data)


def _minmax(op):
    def f(a, b=None, *rest, **kwargs):
        other = kwargs.get("other", b)
        if isinstance(other, (Proxy, BufferProxy)) or is_torch_tensor(other) or isinstance(other, np.ndarray):
            return build(lambda x, y: _ir.binary(op, x, y), a, other)
        if other is None and not rest and not kwargs:
            return a  # the max of a 0-d value is itself
        fail(f"torch.{'maximum' if op == 'max' else 'minimum'} over a dimension of a traced value",
             "values inside a mod are 0-d; for two values use torch.maximum / torch.minimum")
    return f


def _getitem(obj, index):
    if isinstance(obj, (Proxy, BufferProxy)):
        return obj[index]
    ctx = current()
    if ctx is None or not is_torch_tensor(obj):
        fail("indexing a tensor with a traced index outside a trace")
    # A tensor reached through an attribute or a container the capture walk does not follow: bound by
    # identity for this call only (the trace is then not cached).
    return _extra_buffer(ctx, obj)[index]


def _extra_buffer(ctx, origin, as_buffer=lambda t: t):
    """The BufferProxy of a tensor the mod reached outside the walk (`origin`), bound as as_buffer(origin) (itself,
    or the 1-element view of a 0-d one); one name per origin."""
    name = next((n for n, o in ctx.extra_origin.items() if o is origin), None)
    if name is None:
        name = ctx.unique_name("tensor")
        ctx.extra_origin[name], ctx.extra_buffers[name] = origin, as_buffer(origin)
    return BufferProxy(name, ctx.extra_buffers[name])


def _note_made(result, args, kwargs):
    """Marks a 0-d tensor result as made inside the mod when every tensor it came from was (or none was)."""
    ctx = current()
    if ctx is None or not is_torch_tensor(result) or len(result.shape) != 0:
        return
    flat = list(args) + list(kwargs.values())
    for x in flat:
        if isinstance(x, (tuple, list)):
            flat.extend(x)
        elif is_torch_tensor(x) and id(x) not in ctx.made:
            return
    ctx.made[id(result)] = result


def outside_scalar(x):
    """A 0-d torch tensor the mod reached outside its captured names (e.g. self.temp), as a load of a 1-element
    buffer bound per call (the trace is then not cached): a literal would freeze its value and drop its gradient."""
    return _extra_buffer(current(), x, lambda t: t.reshape(1))[0]  # the view keeps autograd's link to x


def _item(x):
    return x.item() if isinstance(x, Proxy) else x


def _un(op):
    return lambda x: build(lambda a: _ir.unary(op, a), x)


def _bin(fn, swap=False):
    return (lambda a, b: build(fn, b, a)) if swap else (lambda a, b: build(fn, a, b))


def _cmp(op):
    return _bin(lambda a, b: _ir.binary(op, a, b))


HANDLERS = {
    "where": lambda c, a, b: build(n_where, c, a, b),
    "clamp": _clamp,
    "clamp_min": lambda x, min: build(lambda a, b: n_clamp(a, b, None), x, min),
    "clamp_max": lambda x, max: build(lambda a, b: n_clamp(a, None, b), x, max),
    "add": lambda a, b, alpha=1: build(n_add, a, b if alpha == 1 else build(n_mul, b, alpha)),
    "sub": lambda a, b, alpha=1: build(n_sub, a, b if alpha == 1 else build(n_mul, b, alpha)),
    "rsub": lambda a, b, alpha=1: build(n_sub, b, a if alpha == 1 else build(n_mul, a, alpha)),
    "mul": _bin(n_mul),
    "div": lambda a, b, rounding_mode=None: build(lambda x, y: n_div(x, y, rounding_mode), a, b),
    "floor_divide": _bin(lambda a, b: _ir.binary("floordiv", a, b)),
    "remainder": _bin(lambda a, b: _ir.binary("mod", a, b)),
    "pow": _bin(n_pow),
    "square": lambda x: build(lambda a: n_mul(a, a), x),
    "minimum": _bin(lambda a, b: _ir.binary("min", a, b)),
    "maximum": _bin(lambda a, b: _ir.binary("max", a, b)),
    "min": _minmax("min"), "max": _minmax("max"),
    "logical_and": _bin(lambda a, b: n_and(_ir.cast(a, "bool"), _ir.cast(b, "bool"))),
    "logical_or": _bin(lambda a, b: n_or(_ir.cast(a, "bool"), _ir.cast(b, "bool"))),
    "logical_xor": _bin(lambda a, b: n_xor(_ir.cast(a, "bool"), _ir.cast(b, "bool"))),
    "logical_not": lambda x: build(lambda a: n_not(_ir.cast(a, "bool")), x),
    "bitwise_and": _bin(n_and), "bitwise_or": _bin(n_or), "bitwise_xor": _bin(n_xor),
    "bitwise_left_shift": _bin(n_shift("bitwise_left_shift", "<<")),
    "bitwise_right_shift": _bin(n_shift("bitwise_right_shift", ">>")),
    "bitwise_not": lambda x: build(n_not, x),
    "trunc": lambda x: build(n_trunc, x), "sign": lambda x: build(n_sign, x),
    "relu": lambda x, inplace=False: build(lambda a: n_clamp(a, _ir.python_literal(0)), x),
    "relu6": lambda x, inplace=False: build(lambda a: n_clamp(a, _ir.python_literal(0), _ir.python_literal(6)), x),
    "hardtanh": lambda x, min_val=-1.0, max_val=1.0, inplace=False: build(
        lambda a: n_clamp(a, _ir.python_literal(float(min_val)), _ir.python_literal(float(max_val))), x),
    "silu": lambda x, inplace=False: build(lambda a: _ir.binary("mul", a, _ir.unary("sigmoid", a)), x),
    "softplus": lambda x, beta=1.0, threshold=20.0: build(lambda a: n_softplus(a, beta, threshold), x),
    "log1p": lambda x: build(n_log1p, x),
    "reciprocal": lambda x: build(lambda a: _ir.binary("div", _ir.python_literal(1.0), a), x),
    "round": lambda x, decimals=0: build(n_round, x) if decimals == 0 else fail(
        "round(decimals=...) in a mod", "round to an integer, or scale first: torch.round(x * 100) / 100"),
    "lerp": lambda a, b, w: build(n_lerp, a, b, w),
    "hypot": _bin(lambda a, b: _ir.unary("sqrt", _ir.binary("add", _ir.binary("mul", a, a), _ir.binary("mul", b, b)))),
    "nan_to_num": lambda x, nan=0.0, posinf=None, neginf=None: build(lambda a: n_nan_to_num(a, nan, posinf, neginf), x),
    "gelu": lambda x, approximate="none": build(lambda a: n_gelu(a, approximate), x),
    # a mod value is 0-d: unsqueezed it broadcasts against a row as it is (_rows.py)
    "unsqueeze": lambda x, dim: x if dim in (-1, 0) else fail(f"unsqueeze(dim={dim!r}) of a mod value",
                                                              "a mod value is 0-d: dim -1 or 0"),
    "isnan": lambda x: build(lambda a: _ir.binary("ne", a, a), x),
    "isinf": lambda x: build(lambda a: _ir.binary("eq", _ir.unary("abs", a), INF), x),
    "isposinf": lambda x: build(lambda a: _ir.binary("eq", a, INF), x),
    "isneginf": lambda x: build(lambda a: _ir.binary("eq", a, _ir.unary("neg", INF)), x),
    "isfinite": lambda x: build(lambda a: _ir.binary("lt", _ir.unary("abs", a), INF), x),
    "to": _to, "type": _to, "type_as": lambda x, other: _to(x, other),
    "float": lambda x, *a, **k: _to(x, "float32"), "double": lambda x, *a, **k: _to(x, "float64"),
    "int": lambda x, *a, **k: _to(x, "int32"), "long": lambda x, *a, **k: _to(x, "int64"),
    "bool": lambda x, *a, **k: _to(x, "bool"), "half": lambda x, *a, **k: _to(x, "float16"),
    "bfloat16": lambda x, *a, **k: _to(x, "bfloat16"),
    "clone": lambda x, *a, **k: x, "detach": _un("detach"), "contiguous": lambda x, *a, **k: x,
    "item": _item,
    "new_ones": _new(1), "new_zeros": _new(0), "new_empty": _new(0), "new_full": _new(None),
    "new_tensor": lambda self, data, dtype=None, **k: _literal_of(data, dtype, self),
    "zeros_like": _like(0), "ones_like": _like(1), "empty_like": _like(0), "full_like": _like(None),
    "tensor": _tensor, "as_tensor": _tensor, "scalar_tensor": _tensor,
    "__getitem__": _getitem,
}
for _op in _ir.UNARY_FLOAT + ("floor", "ceil", "abs", "neg"):
    HANDLERS[_op] = _un(_op)
for _op in _ir.COMPARE:
    HANDLERS[_op] = _cmp(_op)
_ALIASES = {
    "absolute": "abs", "negative": "neg", "special_expit": "sigmoid", "expit": "sigmoid", "special_exp2": "exp2",
    "clip": "clamp", "subtract": "sub", "multiply": "mul", "divide": "div", "true_divide": "div", "fix": "trunc",
    "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le", "not_equal": "ne",
}
for _a, _t in _ALIASES.items():
    HANDLERS[_a] = HANDLERS[_t]
_DUNDERS = {"add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "div": "div", "floordiv": "floor_divide",
            "mod": "remainder", "pow": "pow", "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
            "lshift": "bitwise_left_shift", "rshift": "bitwise_right_shift"}
for _d, _t in _DUNDERS.items():
    HANDLERS[f"__{_d}__"] = HANDLERS[_t]
    HANDLERS[f"__r{_d}__"] = (lambda t: lambda a, b: HANDLERS[t](b, a))(_t)
    HANDLERS[_d] = HANDLERS[_t]  # Proxy._binop uses the short names
for _op in _ir.COMPARE:
    HANDLERS[f"__{_op}__"] = HANDLERS[_op]
HANDLERS.update({"truediv": HANDLERS["div"], "__neg__": HANDLERS["neg"], "__abs__": HANDLERS["abs"],
                 "__invert__": HANDLERS["bitwise_not"], "__pos__": lambda x: x})


def _tensor_where(self, condition, other):
    return HANDLERS["where"](condition, self, other)


_NOT_METHODS = frozenset(("relu6", "hardtanh", "silu", "softplus", "gelu"))  # torch.nn.functional only


def method(name):
    """The Tensor-style method `name` on a proxy, or None."""
    if name == "where":
        return _tensor_where
    return None if name in _NOT_METHODS else HANDLERS.get(name)


def _unsupported(name):
    supported = sorted(k for k in HANDLERS if not k.startswith("__") and k not in _DUNDERS and k != "truediv")
    fail(f"{name} is not supported inside mods", "supported: " + ", ".join(supported))


# Custom operators (torch.library) that mods call, by qualified name: attention-gym's softcap with approx=True
# registers approx::tanh (lowered to tanh.approx.f32 for torch.compile).
_CUSTOM_OPS = {"approx::tanh": "tanh_approx"}


def _custom_op_name(func):
    """'ns::name' of a torch.ops operator (an OpOverload has a schema, an OpOverloadPacket a qualified name),
    None for anything else."""
    schema = getattr(func, "_schema", None)
    name = getattr(schema, "name", None) if schema is not None else getattr(func, "_qualified_op_name", None)
    return name if isinstance(name, str) and "::" in name else None


def call_handler(name, args, kwargs, label=None):
    """HANDLERS[name] on traced operands, or, when an operand is a row of a captured tensor, the row's elementwise
    operation or reduction (_rows.py). The one place that tells the two apart: torch and numpy functions, the
    rows' own torch / numpy protocols and flexattn.ops all come through here. `label` names the call in errors."""
    label = label or name
    from ._proxy import _elementwise_of_one, _swap

    lazy = _elementwise_of_one(name, args, kwargs)
    if lazy is not None:  # an elementwise function of a whole captured tensor: applied to each of its loads
        return lazy._then(lambda p: call_handler(name, _swap(args, lazy, p), _swap(kwargs, lazy, p), label))
    if _has_row(args) or _has_row(tuple(kwargs.values())):
        from ._rows import row_function

        return row_function(name, args, kwargs)
    h = HANDLERS.get(name)
    if h is None:
        _unsupported(label)
    try:
        return h(*args, **kwargs)
    except TypeError as e:
        if "argument" not in str(e):
            raise
        fail(f"{label} called with unsupported arguments", str(e))


def dispatch_torch(func, args, kwargs):
    torch = torch_module()
    if torch is not None and func is getattr(torch.Tensor, "where", None):
        return _tensor_where(*args, **kwargs)
    qualified = _custom_op_name(func)
    if qualified is not None and not qualified.startswith("aten::"):
        if qualified not in _CUSTOM_OPS:
            _unsupported("torch.ops." + qualified.replace("::", "."))
        return call_handler(_CUSTOM_OPS[qualified], args, kwargs, "torch.ops." + qualified.replace("::", "."))
    name = getattr(func, "__name__", repr(func))
    if name.startswith("special_") and name not in HANDLERS:
        name = name[len("special_"):]
    return call_handler(name, args, kwargs, f"torch.{name}")


_NUMPY = {"subtract": "sub", "multiply": "mul", "true_divide": "div", "divide": "div", "mod": "remainder",
          "power": "pow", "negative": "neg", "absolute": "abs", "fabs": "abs", "equal": "eq", "not_equal": "ne",
          "less": "lt", "less_equal": "le", "greater": "gt", "greater_equal": "ge", "invert": "bitwise_not",
          "left_shift": "bitwise_left_shift", "right_shift": "bitwise_right_shift"}


def numpy_name(name):
    """The HANDLERS name of a numpy function or ufunc."""
    return _NUMPY.get(name, name)


def dispatch_numpy(name, args, kwargs):
    if name == "clip":
        x, lo, hi = (list(args) + [None, None])[:3]
        return HANDLERS["clamp"](x, kwargs.get("a_min", lo), kwargs.get("a_max", hi))
    if name == "positive":
        return args[0]
    return call_handler(numpy_name(name), args, kwargs, f"numpy.{name}")


def make_mode():
    """A TorchFunctionMode that sends every torch call with a traced argument to HANDLERS, including
    Tensor.__getitem__ on tensors the capture walk did not reach (as torch's TransformGetItemToIndex)."""
    torch = torch_module()

    class _TraceMode(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if _has_proxy(args) or _has_proxy(tuple(kwargs.values())):
                return dispatch_torch(func, args, kwargs)
            result = func(*args, **kwargs)
            _note_made(result, args, kwargs)
            return result

    return _TraceMode()


def _has_row(xs):
    from ._rows import is_row

    return any(is_row(x) for x in xs)


def _has_proxy(xs):
    from ._rows import RowProxy

    for x in xs:
        if isinstance(x, (Proxy, BufferProxy, RowProxy)):
            return True
        if isinstance(x, (tuple, list)) and _has_proxy(x):
            return True
    return False


__all__ = ["HANDLERS", "method", "dispatch_torch", "dispatch_numpy", "make_mode", "find_dtype", "as_node"]
