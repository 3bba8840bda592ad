"""Vectorised numpy interpreter of the IR: the same semantics as src/ir/eval.cc (the executable
definition of every node), evaluated over broadcast index grids instead of one position at a time.

Floats are computed in float64; integers wrap like torch's int32/int64; x // 0 == x % 0 == 0 for
integers; float -> int casts truncate, saturate and map NaN to 0; buffer indices wrap once if negative
and are then clamped into range.
"""
from __future__ import annotations

import math

import numpy as np

from ._ir import Node, promote, topo_order

_NP = {"bool": np.bool_, "i32": np.int32, "i64": np.int64, "f32": np.float64}
_INT_BOUNDS = {"i32": (-2.0**31, 2.0**31 - 1), "i64": (-2.0**63, 2.0**63 - 1)}


def convert(x, src: str, dst: str):
    x = np.asarray(x)
    if dst == "f32":
        return x.astype(np.float64)
    if dst == "bool":
        return x != 0
    if src == "f32":
        lo, hi = _INT_BOUNDS[dst]
        info = np.iinfo(_NP[dst])
        mid = np.where((x > lo) & (x < hi), np.trunc(np.nan_to_num(x)), 0.0)
        out = mid.astype(_NP[dst])
        out = np.where(x <= lo, info.min, out)
        return np.where(x >= hi, info.max, out).astype(_NP[dst])
    return x.astype(_NP[dst])  # int/bool -> int: C casts wrap like torch


def _floordiv_f(a, b):
    """torch's div_floor_floating."""
    m = np.fmod(a, b)
    div = (a - m) / b
    div = np.where((m != 0) & ((b < 0) != (m < 0)), div - 1.0, div)
    fl = np.floor(div)
    fl = np.where(div - fl > 0.5, fl + 1.0, fl)
    out = np.where(div == 0, np.copysign(0.0, a / b), fl)
    return np.where(b == 0, a / b, out)


def _mod_f(a, b):
    m = np.fmod(a, b)
    return np.where((m != 0) & ((b < 0) != (m < 0)), m + b, m)


def _int_arith(op, x, y, t):
    dt = _NP[t]
    if op == "add":
        return (x + y).astype(dt)
    if op == "sub":
        return (x - y).astype(dt)
    if op == "mul":
        return (x * y).astype(dt)
    if op in ("floordiv", "mod"):
        special = (y == 0) | (y == -1)
        safe = np.where(special, 1, y).astype(dt)
        if op == "mod":
            return np.where(special, 0, np.remainder(x, safe)).astype(dt)
        q = np.floor_divide(x, safe)
        return np.where(y == 0, 0, np.where(y == -1, (-x).astype(dt), q)).astype(dt)
    if op == "min":
        return np.minimum(x, y)
    if op == "max":
        return np.maximum(x, y)
    if op == "pow":
        r = np.power(x, np.where(y < 0, 0, y).astype(dt)).astype(dt)
        neg = np.where(x == 1, 1, np.where(x == -1, np.where(y % 2 != 0, -1, 1), 0))
        return np.where(y < 0, neg, r).astype(dt)
    raise ValueError(op)


def _float_arith(op, x, y):
    if op == "add":
        return x + y
    if op == "sub":
        return x - y
    if op == "mul":
        return x * y
    if op == "div":
        return x / y
    if op == "floordiv":
        return _floordiv_f(x, y)
    if op == "mod":
        return _mod_f(x, y)
    if op == "min":
        return np.minimum(x, y)
    if op == "max":
        return np.maximum(x, y)
    if op == "pow":
        return np.power(x, y)
    raise ValueError(op)


_UNARY_F = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
            "rsqrt": lambda x: 1.0 / np.sqrt(x), "tanh": np.tanh, "tanh_approx": np.tanh, "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
            "sin": np.sin, "cos": np.cos, "tan": np.tan, "erf": np.vectorize(math.erf, otypes=[np.float64])}
_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
        "ge": np.greater_equal}


def _shl(x, y, bits):
    """ATen's lshift: a count outside [0, bits) gives 0; the shift wraps (in unsigned arithmetic)."""
    ok = (y >= 0) & (y < bits)
    u = x.astype(np.uint64 if bits == 64 else np.uint32)
    return np.where(ok, (u << np.where(ok, y, 0).astype(u.dtype)).astype(x.dtype), 0)


def _shr(x, y, bits):
    """ATen's rshift: arithmetic; a count outside [0, bits) gives the sign (0 or -1)."""
    return x >> np.where((y >= 0) & (y < bits), y, bits - 1).astype(x.dtype)


_BITWISE = {"bitwise_and": lambda x, y, bits: x & y, "bitwise_or": lambda x, y, bits: x | y,
            "bitwise_left_shift": _shl, "bitwise_right_shift": _shr}


def _load(n: Node, idx, buf: np.ndarray):
    if buf.ndim != len(idx):
        raise ValueError(f"buffer '{n.name}' has {buf.ndim} dimensions but the mod indexes it with {len(idx)}")
    clamped = []
    for i, size in zip(idx, buf.shape):
        i = np.asarray(i, dtype=np.int64)
        i = np.where(i < 0, i + size, i)
        clamped.append(np.clip(i, 0, size - 1))
    v = buf[tuple(clamped)]
    return convert(v, "f32" if v.dtype.kind == "f" else n.type, n.type)


def _eval_node(n: Node, a, env):
    op = n.op
    if op in ("score", "b", "h", "q_idx", "kv_idx"):
        return convert(env[op], "f32" if op == "score" else "i64", n.type)
    if op == "literal":
        return np.asarray(n.value if n.type == "f32" else int(n.value)).astype(_NP[n.type])
    if op == "scalar":
        v = env["scalars"][n.name]
        return convert(np.asarray(v), "f32" if isinstance(v, float) else "i64", n.type)
    if op == "load":
        return _load(n, a, env["buffers"][n.name])
    src = [x.type for x in n.args]
    if op == "neg":
        return convert(-a[0], src[0], n.type) if n.type != "f32" else -a[0]
    if op == "abs":
        return np.abs(a[0]).astype(_NP[n.type])
    if op in _UNARY_F:
        return _UNARY_F[op](convert(a[0], src[0], "f32"))
    if op == "detach":
        return a[0]
    if op == "floor":
        return np.floor(a[0])
    if op == "ceil":
        return np.ceil(a[0])
    if op == "not":
        return ~convert(a[0], src[0], "bool")
    if op == "cast":
        return convert(a[0], src[0], n.type)
    if op in ("add", "sub", "mul", "div", "floordiv", "mod", "min", "max", "pow"):
        t = n.type
        x, y = convert(a[0], src[0], t), convert(a[1], src[1], t)
        return _float_arith(op, x, y) if t == "f32" else _int_arith(op, x, y, t)
    if op in _CMP:
        t, _ = promote(n.args[0], n.args[1])
        return _CMP[op](convert(a[0], src[0], t), convert(a[1], src[1], t))
    if op in _BITWISE:
        t = n.type
        return _BITWISE[op](convert(a[0], src[0], t), convert(a[1], src[1], t), 32 if t == "i32" else 64).astype(_NP[t])
    if op == "and":
        return convert(a[0], src[0], "bool") & convert(a[1], src[1], "bool")
    if op == "or":
        return convert(a[0], src[0], "bool") | convert(a[1], src[1], "bool")
    if op == "where":
        c = convert(a[0], src[0], "bool")
        return np.where(c, convert(a[1], src[1], n.type), convert(a[2], src[2], n.type))
    raise ValueError(f"internal: unknown IR node '{op}'")


def evaluate(root: Node, env: dict):
    """Value of `root` over broadcast inputs. env: 'score', 'b', 'h', 'q_idx', 'kv_idx' (arrays that
    broadcast together; only those the mod uses are needed), 'scalars' {name: Python number} and
    'buffers' {name: numpy array}. Returns an array of the node's numpy dtype."""
    values = {}
    with np.errstate(all="ignore"):
        for n in topo_order(root):
            values[id(n)] = _eval_node(n, [values[id(x)] for x in n.args], env)
    return values[id(root)]
