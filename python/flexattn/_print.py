"""Printer of the IR text form (docs/ir_text.md, parsed by src/ir/parse.cc).

Shared subexpressions become bindings (`_t0 = ...;`) so the text stays linear in the size of the DAG;
the parser hash-conses them back into the same DAG. Literals keep their exact type: weak ones print
plain (`3`, `2.5`, `true`), strong ones annotated (`3{i32}`, `2.5{f32}`).
"""
from __future__ import annotations

import math

from ._ir import Node, topo_order

PREC_OR, PREC_AND, PREC_CMP, PREC_ADD, PREC_MUL, PREC_UNARY, PREC_POW, PREC_PRIMARY = 2, 3, 4, 5, 6, 7, 8, 9
_INFIX = {
    "add": ("+", PREC_ADD), "sub": ("-", PREC_ADD), "mul": ("*", PREC_MUL), "div": ("/", PREC_MUL),
    "floordiv": ("//", PREC_MUL), "mod": ("%", PREC_MUL), "pow": ("**", PREC_POW),
    "eq": ("==", PREC_CMP), "ne": ("!=", PREC_CMP), "lt": ("<", PREC_CMP), "le": ("<=", PREC_CMP),
    "gt": (">", PREC_CMP), "ge": (">=", PREC_CMP), "and": ("&&", PREC_AND), "or": ("||", PREC_OR),
}
_CALL = {"min": "min", "max": "max", "where": "where", "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or",
         "bitwise_left_shift": "bitwise_left_shift", "bitwise_right_shift": "bitwise_right_shift"}
BINDING_PREFIX = "_t"  # capture never names a scalar or buffer like this (see _capture.unique_name)


def int_text(v: float) -> str:
    return str(int(v))


def float_text(v: float) -> str:
    """A spelling the C++ lexer reads back bit-exactly: always has '.', 'e', 'inf' or 'nan'."""
    if math.isnan(v):
        return "-nan" if math.copysign(1.0, v) < 0 else "nan"
    if math.isinf(v):
        return "-inf" if v < 0 else "inf"
    s = repr(float(v))  # shortest round-trip spelling, like std::to_chars
    return s if ("." in s or "e" in s) else s + ".0"


def _literal_text(n: Node):
    if n.type == "bool":
        s = "true" if n.value else "false"
    elif n.type == "f32":
        s = float_text(n.value)
    else:
        s = int_text(n.value)
    if not n.weak:
        s += "{" + n.type + "}"
    return s, (PREC_UNARY if s.startswith("-") else PREC_PRIMARY)


def _leaf_text(n: Node):
    if n.op == "literal":
        return _literal_text(n)
    if n.op == "scalar":
        return n.name + ("" if n.type == "f32" else "{" + n.type + "}"), PREC_PRIMARY
    return n.op, PREC_PRIMARY  # an input: score, b, h, q_idx, kv_idx


def _wrap(part, need: bool) -> str:
    return "(" + part[0] + ")" if need else part[0]


def _node_text(n: Node, sub) -> tuple:
    """(text, precedence) of n given sub(arg) -> (text, precedence) of its operands."""
    if not n.args:
        return _leaf_text(n)
    a = [sub(x) for x in n.args]
    if n.op == "load":
        dt = "" if n.buffer_dtype == "f32" else "{" + n.buffer_dtype + "}"
        return f"{n.name}{dt}[{', '.join(x[0] for x in a)}]", PREC_PRIMARY
    if n.op == "cast":
        return f"{n.type}({a[0][0]})", PREC_PRIMARY
    if n.op == "neg":
        return "-" + _wrap(a[0], a[0][1] < PREC_POW), PREC_UNARY
    if n.op == "not":
        return "!" + _wrap(a[0], a[0][1] < PREC_POW), PREC_UNARY
    if n.op in _CALL:
        return f"{_CALL[n.op]}({', '.join(x[0] for x in a)})", PREC_PRIMARY
    if n.op in _INFIX:
        sym, p = _INFIX[n.op]
        if p == PREC_POW:  # right associative; the base is a primary, the exponent a unary expression
            left, right = a[0][1] < PREC_PRIMARY, a[1][1] < PREC_UNARY
        elif p == PREC_CMP:  # comparisons do not associate in the text form
            left, right = a[0][1] <= p, a[1][1] <= p
        else:
            left, right = a[0][1] < p, a[1][1] <= p
        return f"{_wrap(a[0], left)} {sym} {_wrap(a[1], right)}", p
    return f"{n.op}({a[0][0]})", PREC_PRIMARY  # unary functions: exp, tanh, floor, abs, ...


def print_text(root: Node) -> str:
    order = topo_order(root)
    users: dict = {}
    for n in order:
        for x in n.args:
            users[id(x)] = users.get(id(x), 0) + 1
    done: dict = {}
    lines = []
    for n in order:
        part = _node_text(n, lambda x: done[id(x)])
        if n.args and users.get(id(n), 0) > 1 and n is not root:
            name = f"{BINDING_PREFIX}{len(lines)}"
            lines.append(f"{name} = {part[0]};")
            part = (name, PREC_PRIMARY)
        done[id(n)] = part
    lines.append(done[id(root)][0])
    return "\n".join(lines)
