"""The mod IR on the Python side: nodes, torch 0-d type promotion and the printer of the text form.

Mirrors src/ir/expr.cc exactly (same node list, same promotion, same builder rules), because the text
this module prints is parsed back through the C++ builders: a type the two sides disagree on would make
the numpy evaluator and the kernels compute different things.

Value types are "bool", "i32", "i64", "f32". `weak` marks Python-scalar-like values (literals written
without a dtype, and expressions of weak operands only).
"""
from __future__ import annotations

import math
import struct
import weakref

VALUE_TYPES = ("bool", "i32", "i64", "f32")
BUFFER_DTYPES = ("bool", "i32", "i64", "f16", "bf16", "f32")
INPUTS = ("score", "b", "h", "q_idx", "kv_idx")
# tanh_approx: tanh on the GPU's tanh.approx.f32 (relative error ~2^-11); exact tanh on the CPU (its definition).
UNARY_FLOAT = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "tanh_approx", "sigmoid", "sin", "cos", "tan", "erf")
UNARY = UNARY_FLOAT + ("neg", "abs", "floor", "ceil", "not", "detach")
ARITH = ("add", "sub", "mul", "div", "floordiv", "mod", "pow", "min", "max")
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
LOGIC = ("and", "or")
# Integer bitwise (ir_nodes.def): torch's & and | on ints, and shifts as ATen defines them.
BITWISE = ("bitwise_and", "bitwise_or", "bitwise_left_shift", "bitwise_right_shift")
BINARY = ARITH + COMPARE + LOGIC + BITWISE
# Identifiers the text form gives a meaning of its own (src/ir/text_syntax.cc kReserved + functions).
RESERVED = frozenset(INPUTS + ("q", "kv", "inf", "nan", "true", "false", "and", "or", "not", "where",
                               "f32", "float", "i32", "i64", "int", "bool", "min", "max", "minimum",
                               "maximum", "pow", "neg", "detach") + UNARY_FLOAT + ("abs", "floor", "ceil") + BITWISE)


class IRTypeError(TypeError):
    """An operation the IR (and torch) does not define for these operand types."""


def category(t: str) -> int:
    return 0 if t == "bool" else (1 if t in ("i32", "i64") else 2)


def load_type(buffer_dtype: str) -> str:
    return "f32" if buffer_dtype in ("f16", "bf16", "f32") else buffer_dtype


class Node:
    """One immutable IR node. Built only through the functions below, which intern (hash-cons) nodes so
    that structurally equal expressions are the same object, as in the C++ IR."""

    __slots__ = ("op", "type", "weak", "value", "name", "buffer_dtype", "args", "__weakref__")

    def __init__(self, op, type_, weak, value, name, buffer_dtype, args):
        self.op, self.type, self.weak = op, type_, weak
        self.value, self.name, self.buffer_dtype, self.args = value, name, buffer_dtype, args

    def __repr__(self):
        from ._print import print_text

        return f"Node({print_text(self)!r})"


# Weak values: an entry lives exactly as long as its node, and a live node keeps its args alive, so the
# arg ids inside a live key can never be reused by other objects.
_INTERN: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()


def _value_key(v):
    return struct.pack("<d", float(v))  # bit pattern: keeps -0.0 apart from 0.0, NaN equal to NaN


def make(op, type_, weak=False, args=(), value=0.0, name="", buffer_dtype="f32") -> Node:
    key = (op, type_, weak, _value_key(value), name, buffer_dtype, tuple(id(a) for a in args))
    node = _INTERN.get(key)
    if node is None:
        node = Node(op, type_, weak, float(value), name, buffer_dtype, tuple(args))
        _INTERN[key] = node
    return node


# ---- leaves ---------------------------------------------------------------------------------------
def input_leaf(name: str) -> Node:
    return make(name, "f32" if name == "score" else "i32")


def literal(v, type_: str, weak: bool) -> Node:
    if type_ == "bool":
        v = 1.0 if v else 0.0
    elif type_ in ("i32", "i64"):
        if not math.isfinite(v):
            raise IRTypeError("an integer literal must be finite")
        v = int(v)
        if type_ == "i32":
            v = (v + 2**31) % 2**32 - 2**31
        elif not -(2**63) <= v < 2**63:
            raise IRTypeError(f"integer literal {v} does not fit in i64")
        elif float(v) != v:  # e.g. a 64-bit bitmask such as 0x5555555555555555
            raise IRTypeError(f"integer literal {v} is not exact in the IR, which keeps literals as doubles (every "
                              "integer up to 2^53 in magnitude is): build it from smaller parts, e.g. (a << 32) | b")
    return make("literal", type_, weak, value=float(v))


def python_literal(v) -> Node:
    """The literal a Python bool/int/float becomes (weak, like torch treats Python scalars)."""
    if isinstance(v, bool):
        return literal(v, "bool", True)
    if isinstance(v, int):
        return literal(v, "i64", True)
    return literal(float(v), "f32", True)


def scalar(name: str, type_: str) -> Node:
    return make("scalar", type_, False, name=name)


def load(buffer: str, buffer_dtype: str, indices) -> Node:
    if not 1 <= len(indices) <= 4:
        raise IRTypeError(f"buffer '{buffer}': a load takes 1 to 4 indices, got {len(indices)}")
    for i, ix in enumerate(indices):
        if ix.type not in ("i32", "i64"):
            raise IRTypeError(f"buffer '{buffer}': index {i} must be an integer, got {type_str(ix)}")
    return make("load", load_type(buffer_dtype), False, args=indices, name=buffer, buffer_dtype=buffer_dtype)


def type_str(n: Node) -> str:
    return n.type + (" (python scalar)" if n.weak else "")


# ---- promotion and builders (expr.cc) -------------------------------------------------------------
def promote(a: Node, b: Node):
    c = max(category(a.type), category(b.type))
    both_weak = a.weak and b.weak
    strong = None
    for n in (a, b):
        if not n.weak and category(n.type) == c and (strong is None or n.type == "i64"):
            strong = n.type
    if strong is not None:
        return strong, both_weak
    if both_weak and a.type == b.type:
        return a.type, both_weak
    return ("bool", "i64", "f32")[c], both_weak


def unary(op: str, a: Node) -> Node:
    if op in ("neg", "abs"):
        if a.type == "bool":
            raise IRTypeError(f"'{op}' is not defined for bool (cast to a number first)")
        return make(op, a.type, a.weak, (a,))
    if op in UNARY_FLOAT:
        return make(op, "f32", a.weak, (a,))
    if op in ("floor", "ceil"):
        if a.type == "bool":
            raise IRTypeError(f"'{op}' is not defined for bool")
        return a if a.type in ("i32", "i64") else make(op, a.type, a.weak, (a,))
    if op == "detach":  # Tensor.detach(): only a float value can carry a gradient to stop
        return a if a.type != "f32" or a.op in ("literal", "scalar", "detach") else make("detach", a.type, a.weak, (a,))
    if op == "not":
        if a.type != "bool":
            raise IRTypeError(f"'not' expects a bool operand, got {type_str(a)} (compare it first, e.g. x != 0)")
        return make("not", "bool", a.weak, (a,))
    raise ValueError(f"internal: '{op}' is not a unary operation")


def _wide_int_literal(n: Node) -> bool:
    return n.op == "literal" and n.weak and n.type == "i64" and not -(2**31) <= n.value < 2**31


def _widened(a: Node, b: Node):
    """A Python int beyond 32 bits (2**40, a hash multiplier 2654435761) meeting an i32 value widens it to i64, as
    Triton types such a constant (torch's compiled flex_attention); the IR's promotion keeps i32 and would wrap the
    constant without a word. The cast is explicit in the IR, so every backend and the simplifier see the same types."""
    if _wide_int_literal(b) and a.type == "i32":
        return cast(a, "i64"), b
    if _wide_int_literal(a) and b.type == "i32":
        return a, cast(b, "i64")
    return a, b


def binary(op: str, a: Node, b: Node) -> Node:
    a, b = _widened(a, b)
    t, weak = promote(a, b)
    if op in ("add", "sub", "mul", "floordiv", "mod", "pow", "div"):
        if t == "bool":
            raise IRTypeError(f"'{op}' is not defined for two bools (use & / | or cast first)")
        return make(op, "f32" if op == "div" else t, weak, (a, b))
    if op in ("min", "max"):
        return make(op, t, weak, (a, b))
    if op in COMPARE:
        return make(op, "bool", weak, (a, b))
    if op in LOGIC:
        if a.type != "bool" or b.type != "bool":
            raise IRTypeError(f"'{op}' expects bool operands, got {type_str(a)} and {type_str(b)}")
        return make(op, "bool", weak, (a, b))
    if op in BITWISE:
        if t not in ("i32", "i64"):
            raise IRTypeError(f"'{op}' expects integer operands, got {type_str(a)} and {type_str(b)}"
                              + (" (for bools use and / or)" if t == "bool" else ""))
        return make(op, t, weak, (a, b))
    raise ValueError(f"internal: '{op}' is not a binary operation")


def select(c: Node, a: Node, b: Node) -> Node:
    if c.type != "bool":
        raise IRTypeError(f"'where': the condition must be bool, got {type_str(c)}")
    a, b = _widened(a, b)
    t, weak = promote(a, b)
    return make("where", t, weak, (c, a, b))


def cast(a: Node, to: str) -> Node:
    if to not in VALUE_TYPES:
        raise IRTypeError(f"'cast': target must be bool, i32, i64 or f32, got {to}")
    if a.type == to and not a.weak:
        return a
    return make("cast", to, False, (a,))


# ---- structure ------------------------------------------------------------------------------------
def topo_order(root: Node):
    """Nodes reachable from root, operands before users, each once (iterative: traced chains are deep)."""
    order, seen, stack = [], {id(root)}, [(root, 0)]
    while stack:
        n, i = stack[-1]
        if i < len(n.args):
            stack[-1] = (n, i + 1)
            child = n.args[i]
            if id(child) not in seen:
                seen.add(id(child))
                stack.append((child, 0))
        else:
            order.append(n)
            stack.pop()
    return order


def depends_only_on_scalars(root: Node) -> bool:
    """True if the value is the same at every position: no input leaf and no buffer load below it."""
    return all(n.op not in INPUTS and n.op != "load" for n in topo_order(root))


def scalar_names(root: Node):
    return sorted({n.name for n in topo_order(root) if n.op == "scalar"})


def buffer_uses(root: Node):
    """{buffer name: (dtype, rank)} of every buffer loaded."""
    return {n.name: (n.buffer_dtype, len(n.args)) for n in topo_order(root) if n.op == "load"}

